"""Payload series of an episode for plots: joint positions, forces, laser summaries, images.

Every series is ``{"name", "t", "v", "samples"}``: ``t`` and ``v`` hold at most
:data:`MAX_POINTS` points; ``samples`` is how many the payloads held. A longer series is
decimated (``"decimated": true``) keeping each stretch's lowest and highest value, so a
spike still shows: a chart is a few hundred pixels wide, and a tactile payload of 200,000
samples sent whole made the episode page's JSON megabytes long and its chart unusable.

A curve is one per name across the episode's records (a joint, a force component of a
topic), not one per record: 20,000 tactile chunks made a chart with 20,000 legend entries.
A chart gets at most :data:`MAX_SERIES` curves, the page :data:`MAX_IMAGES` thumbnails;
``omitted`` counts those left out.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["MAX_IMAGES", "MAX_POINTS", "MAX_SERIES", "decimate", "episode_series", "needs_payload"]

_NUMERIC = (int, float)

#: Points per series sent to a chart (pairs of a stretch's lowest and highest value).
MAX_POINTS = 1000
#: Curves per chart: more are not told apart by colour, and their legend buries the chart.
MAX_SERIES = 16
#: Image thumbnails the page draws (a request each); the rest are counted in ``omitted``.
MAX_IMAGES = 24


def decimate(t: list[float], v: list[float], max_points: int = MAX_POINTS) -> tuple[list[float], list[float]]:
    """At most ``max_points`` of the time-ordered samples (min/max decimation): the first and
    the last (the chart spans the same time), and the lowest and the highest of each of
    ``(max_points - 2) // 2`` equal stretches, in time order."""
    if len(t) <= max_points:
        return t, v
    values = np.asarray(v, dtype=float)
    edges = np.linspace(0, len(values), (max_points - 2) // 2 + 1).astype(int)
    keep = {0, len(values) - 1}
    for low, high in zip(edges[:-1], edges[1:]):
        stretch = values[low:high]
        keep.update((low + int(np.argmin(stretch)), low + int(np.argmax(stretch))))
    return [t[i] for i in sorted(keep)], [v[i] for i in sorted(keep)]


def _series(name: str, t: list[float], v: list[float], **extra: Any) -> dict[str, Any]:
    """A drawable series, time-ordered and decimated when longer than MAX_POINTS.

    Samples that are not finite (a sensor's NaN, a laser's inf) are left out: JSON has no
    such numbers (the episode's whole answer failed with them) and a chart cannot place them."""
    if not all(math.isfinite(x) for x in t) or not all(math.isfinite(x) for x in v):
        kept = [(a, b) for a, b in zip(t, v) if math.isfinite(a) and math.isfinite(b)]
        t, v = [a for a, _ in kept], [b for _, b in kept]
    if any(b < a for a, b in zip(t, t[1:])):
        order = sorted(range(len(t)), key=t.__getitem__)
        t, v = [t[i] for i in order], [v[i] for i in order]
    shown_t, shown_v = decimate(t, v)
    return {"name": name, "t": shown_t, "v": shown_v, "samples": len(t), "decimated": len(shown_t) < len(t),
            **extra}


def _seconds(data: dict[str, Any], memory: dict[str, Any]) -> float:
    return float(data.get("t0_ns", 0)) / 1e9 if "t0_ns" in data else float(memory.get("occurred_at") or 0.0)


#: name -> {"t": [...], "v": [...], "records": n}: samples of one curve gathered from many records
_Curves = dict[str, dict[str, Any]]


def _curve(curves: _Curves, name: str) -> dict[str, Any]:
    return curves.setdefault(name, {"t": [], "v": [], "records": 0})


def _joint_samples(data: dict[str, Any], memory: dict[str, Any], joints: _Curves) -> None:
    t0 = _seconds(data, memory)
    names = [str(n) for n in data.get("names") or []]
    for name in names:
        _curve(joints, name)["records"] += 1
    for t, row in zip(data.get("t") or [], data.get("positions") or []):
        for name, value in zip(names, row if isinstance(row, list) else [row]):
            series = _curve(joints, name)
            series["t"].append(t0 + float(t))
            series["v"].append(float(value))


def _numeric_list(value: Any, length: int) -> bool:
    return isinstance(value, list) and len(value) == length and all(
        isinstance(v, _NUMERIC) and not isinstance(v, bool) for v in value)


def _force_samples(data: dict[str, Any], memory: dict[str, Any], forces: _Curves) -> None:
    """Every numeric list as long as ``t`` in a tactile payload is a curve, named by its key and topic."""
    t = data.get("t")
    if not isinstance(t, list) or not t:
        return
    t0 = _seconds(data, memory)
    topic = ((memory.get("context") or {}).get("source") or {}).get("topic")
    for key, value in data.items():
        if key != "t" and _numeric_list(value, len(t)):
            series = _curve(forces, f"{key} {topic}" if topic else key)
            series["t"].extend(t0 + float(v) for v in t)
            series["v"].extend(float(v) for v in value)
            series["records"] += 1


def _drawn(curves: _Curves) -> tuple[list[dict[str, Any]], int]:
    """The first MAX_SERIES curves by name as series, and how many are left out."""
    names = sorted(curves)
    return ([_series(n, curves[n]["t"], curves[n]["v"], records=curves[n]["records"]) for n in names[:MAX_SERIES]],
            max(0, len(names) - MAX_SERIES))


def _scan_point(data: dict[str, Any], memory: dict[str, Any]) -> tuple[float, float, float] | None:
    """(t, nearest, mean) of a laser scan summary."""
    if "min_range" not in data or "mean_range" not in data:
        return None
    t_ns = (memory.get("context", {}).get("episode") or {}).get("t_ns")
    t = float(t_ns) / 1e9 if isinstance(t_ns, _NUMERIC) else float(memory.get("occurred_at") or 0.0)
    return t, float(data["min_range"]), float(data["mean_range"])


def _scan_series(points: list[tuple[float, float, float]]) -> list[dict[str, Any]]:
    if not points:
        return []
    t = [p[0] for p in points]
    return [_series("nearest", t, [p[1] for p in points]), _series("mean", t, [p[2] for p in points])]


def _summary_keys(memory: dict[str, Any]) -> set[str] | None:
    """The payload's top-level keys from its stored summary (no payload read); None where the
    summary does not list them all (more keys than it names, or not a dict)."""
    shape = (memory.get("payload") or {}).get("shape")
    if not isinstance(shape, dict) or "..." in shape:
        return None
    return set(shape)


def needs_payload(memory: dict[str, Any]) -> bool:
    """Whether :func:`episode_series` reads this record's payload: joint logs, force samples and
    laser summaries, judged from the stored summary. Not an image (the page fetches its thumbnail
    itself: its id is enough) nor a payload no plot draws (a point cloud): decoding those into
    lists made a page of 150 images and 150 clouds take 825 MB."""
    if memory.get("type") != "perception" or memory.get("status") != "active" or "payload" not in memory:
        return False
    keys = _summary_keys(memory)
    if keys is None:
        return True
    if "thumbnail" in keys:
        return False
    return ({"positions", "names"} <= keys or memory.get("perception_type") == "tactile"
            or {"min_range", "mean_range"} <= keys)


def episode_series(memories: list[dict[str, Any]], payloads: dict[int, Any]) -> dict[str, Any]:
    """Plot data from the payloads of an episode's active perceptions (``payloads``: by memory
    id, as ``Memory.get_data_many`` returns them; a perception absent from it is skipped)."""
    joints: _Curves = {}
    forces: _Curves = {}
    scans: list[tuple[float, float, float]] = []
    images: list[int] = []
    for memory in memories:
        if memory.get("type") != "perception" or memory.get("status") != "active":
            continue
        if "thumbnail" in (_summary_keys(memory) or ()):
            images.append(memory["id"])
            continue
        data = payloads.get(memory["id"])
        if not isinstance(data, dict):
            continue
        if "positions" in data and "names" in data:
            _joint_samples(data, memory, joints)
        elif "thumbnail" in data:
            images.append(memory["id"])
        elif memory.get("perception_type") == "tactile":
            _force_samples(data, memory, forces)
        else:
            point = _scan_point(data, memory)
            if point is not None:
                scans.append(point)
    joint_series, joints_omitted = _drawn(joints)
    force_series, forces_omitted = _drawn(forces)
    return {"joints": joint_series, "forces": force_series, "scans": _scan_series(scans), "images": images[:MAX_IMAGES],
            "omitted": {"joints": joints_omitted, "forces": forces_omitted, "images": max(0, len(images) - MAX_IMAGES)}}
