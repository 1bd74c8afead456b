"""Payload series of an episode for plots: joint positions, forces, laser summaries, images.

Every series is ``{"name", "t", "v", "samples"}``: ``t`` and ``v`` hold at most
:data:`MAX_POINTS` points; ``samples`` is how many the payloads held. A longer series is
decimated (``"decimated": true``) keeping each stretch's lowest and highest value, so a
spike still shows: a chart is a few hundred pixels wide, and a tactile payload of 200,000
samples sent whole made the episode page's JSON megabytes long and its chart unusable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from ..service import Memory

__all__ = ["MAX_POINTS", "decimate", "episode_series"]

_NUMERIC = (int, float)

#: Points per series sent to a chart (pairs of a stretch's lowest and highest value).
MAX_POINTS = 1000


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
    """A drawable series, time-ordered and decimated when longer than MAX_POINTS."""
    if any(b < a for a, b in zip(t, t[1:])):
        order = sorted(range(len(t)), key=t.__getitem__)
        t, v = [t[i] for i in order], [v[i] for i in order]
    shown_t, shown_v = decimate(t, v)
    return {"name": name, "t": shown_t, "v": shown_v, "samples": len(t), "decimated": len(shown_t) < len(t),
            **extra}


def _seconds(data: dict[str, Any], memory: dict[str, Any]) -> float:
    return float(data.get("t0_ns", 0)) / 1e9 if "t0_ns" in data else float(memory.get("occurred_at") or 0.0)


def _joint_samples(data: dict[str, Any], memory: dict[str, Any], joints: dict[str, dict[str, list[float]]]) -> None:
    t0 = _seconds(data, memory)
    names = [str(n) for n in data.get("names") or []]
    for t, row in zip(data.get("t") or [], data.get("positions") or []):
        for name, value in zip(names, row if isinstance(row, list) else [row]):
            series = joints.setdefault(name, {"t": [], "v": []})
            series["t"].append(t0 + float(t))
            series["v"].append(float(value))


def _numeric_list(value: Any, length: int) -> bool:
    return isinstance(value, list) and len(value) == length and all(
        isinstance(v, _NUMERIC) and not isinstance(v, bool) for v in value)


def _force_samples(data: dict[str, Any], memory: dict[str, Any]) -> list[dict[str, Any]]:
    """Every numeric list as long as ``t`` in a tactile payload is one curve."""
    t = data.get("t")
    if not isinstance(t, list) or not t:
        return []
    t0 = _seconds(data, memory)
    times = [t0 + float(v) for v in t]
    return [_series(key, times, [float(v) for v in value], memory_id=memory["id"])
            for key, value in data.items() if key != "t" and _numeric_list(value, len(t))]


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


def episode_series(mem: Memory, memories: list[dict[str, Any]]) -> dict[str, Any]:
    """Plot data from the payloads of an episode's active perceptions."""
    joints: dict[str, dict[str, list[float]]] = {}
    forces: list[dict[str, Any]] = []
    scans: list[tuple[float, float, float]] = []
    images: list[int] = []
    for memory in memories:
        if memory.get("type") != "perception" or memory.get("status") != "active":
            continue
        data = mem.get_data(memory["id"])
        if not isinstance(data, dict):
            continue
        if "positions" in data and "names" in data:
            _joint_samples(data, memory, joints)
        elif "thumbnail" in data:
            images.append(memory["id"])
        elif memory.get("perception_type") == "tactile":
            forces.extend(_force_samples(data, memory))
        else:
            point = _scan_point(data, memory)
            if point is not None:
                scans.append(point)
    return {"joints": [_series(name, s["t"], s["v"]) for name, s in sorted(joints.items())], "forces": forces,
            "scans": _scan_series(scans), "images": images}
