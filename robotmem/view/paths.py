"""An episode's pose trajectory as drawable segments, broken wherever data is missing.

The replay and bridge store a pose trajectory as chunks (one perception per
``chunk_seconds``; payload ``t`` relative to ``t0_ns``, ``x``, ``y`` and, for interleaved
streams, ``track``). Joining every chunk into one polyline would draw a straight line
across an outage or between two robots sharing a topic, which is exactly what a person
must not be shown as "the robot went here". So a segment ends:

* where a recorded gap (``gaps: [{start, end, reason}]``, epoch seconds, on the chunk or
  the episode) lies between two points;
* where two consecutive points are further apart in time than ``max_gap_s`` *between*
  chunks (inside a chunk the points are a simplified line: long straight runs keep few
  points, so a long interval there is not missing data);
* where the ``track`` index changes (one segment list per track).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["GAP_HOLDERS", "MAX_PATH_POINTS", "decimate_path", "episode_paths", "gaps_of", "is_pose_chunk",
           "segment_starts"]

MAX_GAP_S = 2.0
#: Points of one drawn path (a topic and track of an episode), over all its segments.
MAX_PATH_POINTS = 2000


def is_pose_chunk(memory: dict[str, Any]) -> bool:
    spatial = memory.get("context", {}).get("spatial") or {}
    return memory.get("perception_type") == "proprioceptive" and "start_position" in spatial \
        and "end_position" in spatial and "joint_travel" not in (memory.get("context", {}).get("params") or {})


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _floats(values: Any) -> np.ndarray:
    """A payload's list or array as floats; an entry that is no number is NaN (as _number reads it)."""
    if values is None:
        return np.empty(0)
    if type(values) is np.ndarray and values.dtype == np.float64 and values.ndim == 1:
        return values  # as a payload read as_numpy holds it: no copy, no call
    try:
        return np.asarray(values, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        return np.array([_number(v) for v in values], dtype=float)


class _Chunks:
    """One topic's chunks, their samples gathered for :func:`_track_points`: per chunk its
    ``t0_ns`` and arrays (the shortest of ``t``, ``x``, ``y`` and a given ``track`` sets the
    count; a sample with no number is NaN, and _track_points leaves it out). The arithmetic is
    done on all chunks at once: per chunk it was most of 0.9 s of a 100,000-chunk page."""

    def __init__(self) -> None:
        self.t0: list[float] = []
        self.ts: list[np.ndarray] = []
        self.xs: list[np.ndarray] = []
        self.ys: list[np.ndarray] = []
        self.tracks: list[np.ndarray | None] = []
        self.sizes: list[int] = []

    def add(self, data: dict[str, Any]) -> None:
        ts, xs, ys = _floats(data.get("t")), _floats(data.get("x")), _floats(data.get("y"))
        raw_tracks = data.get("track")
        tracks = _floats(raw_tracks) if raw_tracks is not None and len(raw_tracks) > 0 else None
        n = min(len(ts), len(xs), len(ys), len(ts) if tracks is None else len(tracks))
        self.t0.append(_number(data.get("t0_ns", 0)))
        self.ts.append(ts[:n] if len(ts) != n else ts)
        self.xs.append(xs[:n] if len(xs) != n else xs)
        self.ys.append(ys[:n] if len(ys) != n else ys)
        self.tracks.append(None if tracks is None else tracks[:n])
        self.sizes.append(n)

    def samples(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Times in epoch seconds, x, y, track and the chunk of every sample, in chunk order."""
        sizes = np.asarray(self.sizes, dtype=np.int64)
        at = np.repeat(np.asarray(self.t0, dtype=float) / 1e9, sizes) + np.concatenate(self.ts)
        tracks = np.concatenate([np.zeros(n) if t is None else t for t, n in zip(self.tracks, self.sizes)]) \
            if any(t is not None for t in self.tracks) else np.zeros(len(at))
        return at, np.concatenate(self.xs), np.concatenate(self.ys), tracks, np.repeat(np.arange(len(sizes)), sizes)


def _track_points(chunks: _Chunks) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Per track, the points of one topic's chunks: times, x, y, whether each is its chunk's first,
    and the times of the points left out. The chunks are ordered by their first point's time; a
    point with a NaN or infinite (or missing) x or y is no place to draw, and the path breaks there
    (a line across it would claim the robot went straight); a point whose time (or track) is not
    finite is left out with no break (it has no place in time). All chunks at once: 100,000 chunks
    read point by point took 4.6 s of a page, and chunk by chunk in numpy 4.2 s."""
    at, xs, ys, tracks, chunk_of = chunks.samples()
    count = len(chunks.sizes)
    timed = np.isfinite(at) & np.isfinite(tracks)
    placed = timed & np.isfinite(xs) & np.isfinite(ys)
    whole = np.where(timed, tracks, 0).astype(np.int64)
    found = {}
    for track in np.unique(whole[timed]).tolist():
        mine = timed & (whole == track)
        kept = np.flatnonzero(mine & placed)
        if not len(kept):
            continue
        owner = chunk_of[kept]
        first = np.concatenate(([True], owner[1:] != owner[:-1]))  # a chunk's points are contiguous
        rank = np.empty(count)
        rank[owner[first]] = np.argsort(np.argsort(at[kept][first], kind="stable"), kind="stable")
        order = kept[np.argsort(rank[owner], kind="stable")]
        ordered_owner = chunk_of[order]
        found[int(track)] = (at[order], xs[order], ys[order],
                             np.concatenate(([True], ordered_owner[1:] != ordered_owner[:-1])),
                             at[mine & ~placed])
    return found


#: The sections of a context that may hold its recorded ``gaps`` ("": the context itself).
GAP_HOLDERS = ("", "episode", "spatial")


def gaps_of(context: dict[str, Any]) -> list[dict[str, Any]]:
    """The recorded gaps of a memory's or session's context (``gaps`` in each of GAP_HOLDERS)."""
    found = []
    for name in GAP_HOLDERS:
        listed = ((context.get(name) or {}) if name else context).get("gaps")
        for gap in listed or ():
            if isinstance(gap, dict) and isinstance(gap.get("start"), (int, float)) \
                    and isinstance(gap.get("end"), (int, float)):
                found.append({"start": float(gap["start"]), "end": float(gap["end"]),
                              "reason": gap.get("reason"), "topic": gap.get("topic")})
    return found


def _spans(gaps: list[dict[str, Any]], topic: str) -> list[tuple[float, float]]:
    """A gap of another topic (the camera went quiet) is no hole in this path; one of every topic is."""
    return [(g["start"], g["end"]) for g in gaps if g.get("topic") in (None, topic)]


#: Time spans (start, end) a path must not be drawn across: a list of pairs or an array of them.
Spans = Sequence[tuple[float, float]] | np.ndarray


def _crossings(before: np.ndarray, after: np.ndarray, gaps: Spans) -> np.ndarray:
    """Per pair of points (``before[i]``, ``after[i]`` their times): whether a gap (start, end)
    lies between them, i.e. ``start < after and end > before``: among the gaps starting before
    ``after``, the latest end."""
    if not len(gaps):
        return np.zeros(len(after), dtype=bool)
    spans = np.asarray(gaps, dtype=float).reshape(-1, 2)
    spans = spans[~np.isnan(spans).any(axis=1)]  # a NaN end lies nowhere (and would hide the gaps after it)
    order = np.argsort(spans[:, 0], kind="stable")
    starts, latest_end = spans[order, 0], np.maximum.accumulate(spans[order, 1])
    started = np.searchsorted(starts, after, side="left")  # gaps with start < after
    return (started > 0) & (latest_end[np.maximum(started - 1, 0)] > before)


def segment_starts(t: np.ndarray, chunk_first: np.ndarray, gaps: Spans,
                    max_gap_s: float) -> np.ndarray:
    """Indices where a segment starts, 0 first: a gap between a point and the one before, or a
    chunk's first point further than ``max_gap_s`` from the last of the chunk before. Inside a
    chunk the points are a simplified line: a long interval there is no missing data."""
    if not len(t):
        return np.zeros(0, dtype=np.int64)
    before, after = t[:-1], t[1:]
    cut = _crossings(before, after, gaps) | (chunk_first[1:] & (after - before > max_gap_s))
    return np.concatenate(([0], np.flatnonzero(cut) + 1))


def episode_paths(session: dict[str, Any], memories: list[dict[str, Any]],
                  payloads: dict[int, Any]) -> list[dict[str, Any]]:
    """One entry per (pose topic, track) of an episode: its session and records (as
    ``Memory.session_timeline`` returns them) and their payloads by memory id (as
    ``Memory.get_data_many`` returns them, lists or numpy arrays; a chunk absent from it is skipped)."""
    episode_gaps = gaps_of(session.get("context") or {})
    chunks_by_key: dict[tuple[str, str], _Chunks] = {}
    gaps_by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for memory in memories:
        if memory.get("status") != "active" or not is_pose_chunk(memory):
            continue
        context = memory["context"]
        topic = (context.get("source") or {}).get("topic", "")
        frame = _frame_of(context.get("spatial") or {})
        data = payloads.get(memory["id"])
        if not isinstance(data, dict):
            continue
        key = topic, frame
        if key not in chunks_by_key:
            chunks_by_key[key], gaps_by_key[key] = _Chunks(), []
        gaps_by_key[key] += gaps_of(context)
        chunks_by_key[key].add(data)
    drawn_paths = []
    for (topic, frame), chunks in chunks_by_key.items():
        gaps = np.asarray(_spans(episode_gaps + gaps_by_key[(topic, frame)], topic), dtype=float).reshape(-1, 2)
        for track, (t, x, y, chunk_first, left_out) in _track_points(chunks).items():
            # a span of no length at a left-out point splits there
            spans = np.concatenate([gaps, np.column_stack([left_out, left_out])])
            drawn = decimate_path(x, y, segment_starts(t, chunk_first, spans, MAX_GAP_S))
            drawn_paths.append({"topic": topic, "frame": frame, "track": track,
                                "segments": [np.column_stack([x[kept], y[kept]]).tolist() for kept in drawn],
                                "times": [t[kept].tolist() for kept in drawn],
                                "points": len(t), "decimated": sum(len(kept) for kept in drawn) < len(t)})
    return sorted(drawn_paths, key=lambda path: (path["topic"], path["frame"], path["track"]))


def decimate_path(x: np.ndarray, y: np.ndarray, starts: np.ndarray,
                  max_points: int = MAX_PATH_POINTS) -> list[np.ndarray]:
    """The indices of the points drawn, per segment (``starts``: where each begins), at most
    ``max_points`` over all. A map is a few hundred pixels wide; a day-long odometry trail sent
    whole is megabytes of JSON.

    Each segment keeps its first and last point (it still starts and ends where the data does).
    The points, in time order, are cut into ``(max_points - 2 * segments) // 4`` stretches of
    equal count (``numpy.linspace(0, points, stretches + 1)``, rounded down), and each stretch
    keeps its points of lowest and highest x and of lowest and highest y: a spike the robot's
    pose took (a jump in localisation, a collision) stays on the map, where every k-th point
    hid it. A path broken into more pieces than a quarter of the budget (a gap every few points)
    keeps every j-th piece, as its two ends: segments are never joined, which would draw a line
    across missing data."""
    total = len(x)
    ends = np.append(starts[1:], total).astype(np.int64)
    bounds = list(zip(starts.tolist(), ends.tolist()))
    if total <= max_points:
        return [np.arange(a, b) for a, b in bounds]
    if 4 * len(bounds) > max_points:
        every = math.ceil(4 * len(bounds) / max_points)
        return [np.arange(a, b) if b - a <= 2 else np.array([a, b - 1]) for a, b in bounds[::every]]
    keep = np.zeros(total, dtype=bool)
    keep[starts] = keep[ends - 1] = True
    edges = np.linspace(0, total, (max_points - 2 * len(bounds)) // 4 + 1).astype(np.int64).tolist()
    for low, high in zip(edges[:-1], edges[1:]):
        if high > low:
            for values in (x[low:high], y[low:high]):
                keep[low + int(np.argmin(values))] = keep[low + int(np.argmax(values))] = True
    return [a + np.flatnonzero(keep[a:b]) for a, b in bounds]


def _frame_of(spatial: dict[str, Any]) -> str:
    return str(spatial.get("frame") or spatial.get("frame_id") or "")
