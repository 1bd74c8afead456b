"""Is a pose stream one physical track? Split it into tracks and judge its path length.

Real recordings are messy: a topic may interleave two pose sources (two frames, two
localisers), jump when a localiser relocalises, or change frame. Summing the distance
between consecutive messages then reports kilometres for a robot that drove metres.

Rule (documented in docs/replay.md):

* A step from a track's last point is *plausible* when its length is at most
  ``max_speed_mps * dt + jump_tolerance_m`` (the slack absorbs coarse timestamps) and the
  frame_id is the same. Each point continues the nearest track it can plausibly continue
  ("nearest continuation"); when there is none it starts a new track.
* Tracks with fewer than ``max(3, 1%)`` of the points are outliers (single glitches).
* One remaining track: ``ok`` (or ``outliers_removed``) - the path length is that track's.
* Several tracks one after another (a relocalisation, a frame change): ``discontinuous`` -
  the path length is the sum of the tracks' own lengths; the jumps are not counted.
* Several tracks alive at the same time: ``interleaved`` - there is no single path, so
  no ``path_length_m`` is reported; each track's length is listed instead.

The common case - every step plausible - is decided with one vectorised comparison;
the per-point loop runs only for chunks that contain a jump.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["PathVerdict", "Track", "TrackSplitter", "judge_tracks"]


@dataclass
class Track:
    """One physically continuous sequence of poses."""

    ident: int
    frame_id: str
    first_t_ns: int
    last_t_ns: int
    last_point: NDArray[np.float64]
    points: int = 0
    length_m: float = 0.0


@dataclass(frozen=True)
class TrackPiece:
    """Part of one track inside a window (a chunk or an episode)."""

    ident: int
    points: int
    first_t_ns: int
    last_t_ns: int
    length_m: float


@dataclass(frozen=True)
class PathVerdict:
    #: "ok" | "outliers_removed" | "discontinuous" | "interleaved" | "empty"; the pose converter
    #: turns ok / outliers_removed into "gaps" when data is missing (gaps.py)
    quality: str
    path_length_m: float | None
    primary_track: int | None
    note: str | None = None
    tracks: list[dict[str, Any]] = field(default_factory=list)


class TrackSplitter:
    """Assigns each pose to a track, across chunk boundaries (one instance per topic and episode)."""

    def __init__(self, max_speed_mps: float, jump_tolerance_m: float) -> None:
        self.max_speed = max_speed_mps
        self.tolerance = jump_tolerance_m
        self.tracks: list[Track] = []
        self._current: Track | None = None

    def assign(
        self, t_ns: NDArray[np.int64], points: NDArray[np.float64], frame_id: str
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Track id of each point and the length of the step that reached it (0 for a track's first point).

        All points of one call share ``frame_id`` (the caller splits at frame changes).
        """
        if len(points) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        fast = self._assign_continuous(t_ns, points, frame_id)
        if fast is not None:
            return fast
        return self._assign_by_nearest(t_ns, points, frame_id)

    def _assign_continuous(
        self, t_ns: NDArray[np.int64], points: NDArray[np.float64], frame_id: str
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]] | None:
        """Fast path: every step continues the current track plausibly."""
        current = self._current
        if current is None or current.frame_id != frame_id or len(self.tracks) != 1:
            if self.tracks:
                return None
            current = self._new_track(int(t_ns[0]), points[0], frame_id)
            current.points = 0
        prev_points = np.vstack([current.last_point[None, :], points[:-1]])
        prev_t = np.concatenate([[current.last_t_ns], t_ns[:-1]])
        steps = np.linalg.norm(points - prev_points, axis=1)
        dt_s = np.abs(t_ns - prev_t) / 1e9
        if not bool(np.all(steps <= self.max_speed * dt_s + self.tolerance)):
            return None
        current.points += len(points)
        current.length_m += float(steps.sum())
        current.last_point = points[-1].copy()
        current.last_t_ns = int(t_ns[-1])
        return np.full(len(points), current.ident, dtype=np.int64), steps

    def _assign_by_nearest(
        self, t_ns: NDArray[np.int64], points: NDArray[np.float64], frame_id: str
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        ids = np.empty(len(points), dtype=np.int64)
        steps = np.zeros(len(points))
        for i in range(len(points)):
            t = int(t_ns[i])
            point = points[i]
            track, distance = self._nearest_plausible(t, point, frame_id)
            if track is None:
                track = self._new_track(t, point, frame_id)
                distance = 0.0
            else:
                track.points += 1
                track.length_m += distance
                track.last_point = point.copy()
                track.last_t_ns = t
            ids[i] = track.ident
            steps[i] = distance
            self._current = track
        return ids, steps

    def _nearest_plausible(self, t: int, point: NDArray[np.float64], frame_id: str) -> tuple[Track | None, float]:
        best: Track | None = None
        best_distance = np.inf
        for track in self.tracks:
            if track.frame_id != frame_id:
                continue
            distance = float(np.sqrt(((point - track.last_point) ** 2).sum()))
            limit = self.max_speed * abs(t - track.last_t_ns) / 1e9 + self.tolerance
            if distance <= limit and distance < best_distance:
                best, best_distance = track, distance
        return best, float(best_distance)

    def _new_track(self, t: int, point: NDArray[np.float64], frame_id: str) -> Track:
        track = Track(len(self.tracks), frame_id, t, t, point.copy(), points=1)
        self.tracks.append(track)
        self._current = track
        return track


def pieces_of(ids: NDArray[np.int64], t_ns: NDArray[np.int64], steps: NDArray[np.float64]) -> list[TrackPiece]:
    """Summarise the points of a window per track."""
    result = []
    for ident in np.unique(ids):
        mask = ids == ident
        times = t_ns[mask]
        result.append(TrackPiece(int(ident), int(mask.sum()), int(times.min()), int(times.max()), float(steps[mask].sum())))
    return result


def judge_tracks(pieces: list[TrackPiece], topic: str) -> PathVerdict:
    """Apply the rule in the module docstring to the tracks seen in one window."""
    total = sum(p.points for p in pieces)
    if total == 0:
        return PathVerdict("empty", None, None)
    threshold = max(3, int(0.01 * total))
    significant = sorted((p for p in pieces if p.points >= threshold), key=lambda p: p.first_t_ns)
    outliers = total - sum(p.points for p in significant)
    if not significant:  # only a handful of points, all glitches: keep the largest
        significant = [max(pieces, key=lambda p: p.points)]
        outliers = total - significant[0].points
    primary = max(significant, key=lambda p: p.points)
    listed = [
        {"track": p.ident, "points": p.points, "path_length_m": round(p.length_m, 4),
         "duration_s": round((p.last_t_ns - p.first_t_ns) / 1e9, 3)}
        for p in significant
    ]
    if len(significant) == 1:
        if outliers:
            note = f"{topic}: {outliers} outlier point(s) left out of the path"
            return PathVerdict("outliers_removed", primary.length_m, primary.ident, note, listed)
        return PathVerdict("ok", primary.length_m, primary.ident, None, listed)
    if _overlap(significant):
        note = (
            f"{topic} is not one physical track: {len(significant)} pose tracks interleave "
            f"(track lengths {', '.join(f'{p.length_m:.1f} m' for p in significant)}); "
            "no path length is reported"
        )
        return PathVerdict("interleaved", None, primary.ident, note, listed)
    total_length = sum(p.length_m for p in significant)
    note = f"{topic}: {len(significant) - 1} jump(s) between tracks left out of the path length"
    return PathVerdict("discontinuous", total_length, primary.ident, note, listed)


#: tracks that share less time than this are sequential (stamps are often whole seconds)
_OVERLAP_SLACK_NS = 1_000_000_000


def _overlap(pieces: list[TrackPiece]) -> bool:
    """Whether tracks (sorted by start) share time: a later one starts before an earlier one ends."""
    latest_end = pieces[0].last_t_ns
    for piece in pieces[1:]:
        if piece.first_t_ns < latest_end - _OVERLAP_SLACK_NS:
            return True
        latest_end = max(latest_end, piece.last_t_ns)
    return False
