"""Payload series of an episode for plots: joint positions, forces, laser summaries, images."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..service import Memory

__all__ = ["episode_series"]

_NUMERIC = (int, float)


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
    return [{"memory_id": memory["id"], "name": key, "t": times, "v": [float(v) for v in value]}
            for key, value in data.items() if key != "t" and _numeric_list(value, len(t))]


def _scan_point(data: dict[str, Any], memory: dict[str, Any]) -> dict[str, float] | None:
    if "min_range" not in data or "mean_range" not in data:
        return None
    t_ns = (memory.get("context", {}).get("episode") or {}).get("t_ns")
    t = float(t_ns) / 1e9 if isinstance(t_ns, _NUMERIC) else float(memory.get("occurred_at") or 0.0)
    return {"t": t, "min": float(data["min_range"]), "mean": float(data["mean_range"])}


def episode_series(mem: Memory, memories: list[dict[str, Any]]) -> dict[str, Any]:
    """Plot data from the payloads of an episode's active perceptions."""
    joints: dict[str, dict[str, list[float]]] = {}
    forces: list[dict[str, Any]] = []
    scans: list[dict[str, float]] = []
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
    for series in joints.values():
        order = sorted(range(len(series["t"])), key=series["t"].__getitem__)
        series["t"] = [series["t"][i] for i in order]
        series["v"] = [series["v"][i] for i in order]
    scans.sort(key=lambda p: p["t"])
    return {"joints": [{"name": n, **s} for n, s in sorted(joints.items())], "forces": forces,
            "scans": scans, "images": images}
