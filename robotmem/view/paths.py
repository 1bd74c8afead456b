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
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["GAP_HOLDERS", "MAX_PATH_POINTS", "Point", "episode_paths", "gaps_of", "is_pose_chunk", "split_segments", "thin_segments"]

#: (t in epoch seconds, x, y)
Point = tuple[float, float, float]
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


def _chunk_points(data: dict[str, Any]) -> tuple[dict[int, list[Point]], dict[int, list[float]]]:
    """Points of one chunk per track, times in epoch seconds, and per track the times of the
    points left out: a point with a NaN or infinite (or missing) x or y is no place to draw, and
    the path breaks there (a line across it would claim the robot went straight). A point whose
    time is not finite is left out too (with no break: it has no place in time)."""
    t0 = _number(data.get("t0_ns", 0)) / 1e9
    ts, xs, ys = data.get("t") or [], data.get("x") or [], data.get("y") or []
    tracks = data.get("track") or [0] * len(ts)
    by_track: dict[int, list[Point]] = {}
    breaks: dict[int, list[float]] = {}
    for t, x, y, track in zip(ts, xs, ys, tracks):
        at, px, py = t0 + _number(t), _number(x), _number(y)
        if not math.isfinite(at):
            continue
        if math.isfinite(px) and math.isfinite(py):
            by_track.setdefault(int(track), []).append((at, px, py))
        else:
            breaks.setdefault(int(track), []).append(at)
    return by_track, breaks


#: The sections of a context that may hold its recorded ``gaps`` ("": the context itself).
GAP_HOLDERS = ("", "episode", "spatial")


def gaps_of(context: dict[str, Any]) -> list[dict[str, Any]]:
    """The recorded gaps of a memory's or session's context (``gaps`` in each of GAP_HOLDERS)."""
    found = []
    for holder in (context.get(name) or {} if name else context for name in GAP_HOLDERS):
        for gap in holder.get("gaps") or []:
            if isinstance(gap, dict) and isinstance(gap.get("start"), (int, float)) \
                    and isinstance(gap.get("end"), (int, float)):
                found.append({"start": float(gap["start"]), "end": float(gap["end"]),
                              "reason": gap.get("reason"), "topic": gap.get("topic")})
    return found


def _spans(gaps: list[dict[str, Any]], topic: str) -> list[tuple[float, float]]:
    """A gap of another topic (the camera went quiet) is no hole in this path; one of every topic is."""
    return [(g["start"], g["end"]) for g in gaps if g.get("topic") in (None, topic)]


def _crosses_gap(a: float, b: float, gaps: Sequence[tuple[float, float]]) -> bool:
    return any(start < b and end > a for start, end in gaps)


def split_segments(
    chunks: Iterable[list[Point]], gaps: Sequence[tuple[float, float]] = (), max_gap_s: float = MAX_GAP_S
) -> list[list[Point]]:
    """Chunks (each a time-ordered point list) → segments with no jump across missing data."""
    segments: list[list[Point]] = []
    current: list[Point] = []
    for chunk in chunks:
        for index, point in enumerate(chunk):
            if current:
                previous = current[-1]
                between_chunks = index == 0
                if _crosses_gap(previous[0], point[0], gaps) or (
                        between_chunks and point[0] - previous[0] > max_gap_s):
                    segments.append(current)
                    current = []
            current.append(point)
    if current:
        segments.append(current)
    return segments


def episode_paths(session: dict[str, Any], memories: list[dict[str, Any]],
                  payloads: dict[int, Any]) -> list[dict[str, Any]]:
    """One entry per (pose topic, track) of an episode: its session and records (as
    ``Memory.session_timeline`` returns them) and their payloads by memory id (as
    ``Memory.get_data_many`` returns them; a chunk absent from it is skipped)."""
    episode_gaps = gaps_of(session.get("context") or {})
    chunks_by_key: dict[tuple[str, str, int], list[tuple[float, list[Point]]]] = {}
    breaks_by_key: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
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
        gaps_by_key.setdefault((topic, frame), []).extend(gaps_of(context))
        points_by_track, breaks = _chunk_points(data)
        for track, points in points_by_track.items():
            if points:
                chunks_by_key.setdefault((topic, frame, track), []).append((points[0][0], points))
        for track, times in breaks.items():  # a span of no length at the left-out point splits there
            breaks_by_key.setdefault((topic, frame, track), []).extend((at, at) for at in times)
    paths = []
    for (topic, frame, track), chunks in sorted(chunks_by_key.items()):
        ordered = [points for _, points in sorted(chunks, key=lambda item: item[0])]
        spans = _spans(episode_gaps + gaps_by_key.get((topic, frame), []), topic) + breaks_by_key.get((topic, frame, track), [])
        segments = split_segments(ordered, spans)
        stored = sum(len(segment) for segment in segments)
        drawn = thin_segments(segments)
        paths.append({"topic": topic, "frame": frame, "track": track,
                      "segments": [[[x, y] for _, x, y in segment] for segment in drawn],
                      "times": [[t for t, _, _ in segment] for segment in drawn],
                      "points": stored, "decimated": sum(len(segment) for segment in drawn) < stored})
    return paths


def thin_segments(segments: list[list[Point]], max_points: int = MAX_PATH_POINTS) -> list[list[Point]]:
    """At most ``max_points`` points over all segments. A map is a few hundred pixels wide; a
    day-long odometry trail sent whole is megabytes of JSON.

    Each segment keeps its first and last point (it still starts and ends where the data does)
    and every k-th point between, k chosen so the ends fit too. A path broken into more pieces
    than a quarter of the budget (a gap every few points) keeps every j-th piece, as its two
    ends: segments are never joined, which would draw a line across missing data."""
    total = sum(len(segment) for segment in segments)
    if total <= max_points:
        return segments
    if 4 * len(segments) > max_points:
        every = math.ceil(4 * len(segments) / max_points)
        return [segment if len(segment) <= 2 else [segment[0], segment[-1]] for segment in segments[::every]]
    step = math.ceil(total / (max_points - 2 * len(segments)))
    return [segment if len(segment) <= 2 else segment[:-1:step] + [segment[-1]] for segment in segments]


def _frame_of(spatial: dict[str, Any]) -> str:
    return str(spatial.get("frame") or spatial.get("frame_id") or "")
