"""Nearest-first recall over the R*Tree of context points (robotmem.store.points).

A box around the target grows (x2 each step) until it holds enough eligible points
whose exact distance is within the box's half-width: every point outside the box is
farther than that, so those are exactly the nearest. Exact filters are evaluated by
SQL on the points inside the box only.

With ``spatial_sort.frame``, a memory whose ``frame`` (beside the sorted field:
``spatial.position`` -> ``spatial.frame``) names another frame is not compared by
distance: without ``max_distance`` it comes after the compared ones (as memories without
the field do), with ``max_distance`` it is left out. A memory that names no frame is
compared (its frame is unknown, as before frames were recorded).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from . import sql
from .request import RecallRequest, SpatialSort

__all__ = ["nearest"]

_FIRST_RADIUS = 0.25
_GROWTH = 2.0
_MAX_RADIUS = 1e6


def _distance(target: tuple[float, ...], x: float, y: float, z: float) -> float:
    if len(target) == 2:
        return math.hypot(x - target[0], y - target[1])
    return math.sqrt((x - target[0]) ** 2 + (y - target[1]) ** 2 + (z - target[2]) ** 2)


def _rtree_query(req: RecallRequest, spatial: SpatialSort, radius: float | None, now: float,
           half_life_s: float) -> tuple[str, list[Any]]:
    where, params = sql.eligibility_sql(req, now, half_life_s)
    box, box_params = "", []
    if radius is not None:
        axes = ("x", "y", "z")[: len(spatial.target)]
        box = "".join(f" AND r.max{a} >= ? AND r.min{a} <= ?" for a in axes)
        for value in spatial.target:
            box_params += [value - radius, value + radius]
    frame, frame_params = "", []
    if spatial.frame is not None:
        # A point in another frame has no distance to the target (its numbers mean another place).
        frame = " AND coalesce(json_extract(m.context, ?), ?) = ?"
        frame_params = [spatial.frame_path, spatial.frame, spatial.frame]
    return (
        ("SELECT r.memory_id, r.px, r.py, r.pz FROM spatial_points r JOIN memories m ON m.id = r.memory_id "
        f"WHERE r.field = ?{box}{frame} AND {where}"),
        [spatial.field, *box_params, *frame_params, *params],
    )


def _distances(conn: Any, q: str, p: list[Any], target: tuple[float, ...]) -> dict[int, float]:
    best: dict[int, float] = {}
    for memory_id, x, y, z in conn.execute(q, p):
        d = _distance(target, x, y, z)
        if d < best.get(memory_id, math.inf):
            best[memory_id] = d
    return best


PointsQuery = Callable[[RecallRequest, SpatialSort, "float | None", float, float], "tuple[str, list[Any]]"]


def nearest(conn: Any, req: RecallRequest, now: float, half_life_s: float,
            need: int, points_query: PointsQuery | None = None) -> list[tuple[int, float]]:
    """At least ``need`` (when that many exist) eligible (memory_id, distance), nearest first.

    ``points_query(req, spatial, radius, now, half_life_s)`` selects (memory_id, x, y, z) of the
    eligible points inside the box of half-width ``radius`` (all of them for None); the
    default reads SQLite's R*Tree, robotmem.search.postgres passes PostgreSQL's GiST one.
    """
    _query = points_query or _rtree_query
    spatial = req.spatial
    assert spatial is not None
    if spatial.max_distance is not None:
        q, p = _query(req, spatial, spatial.max_distance, now, half_life_s)
        found = _distances(conn, q, p, spatial.target)
        return sorted(((m, d) for m, d in found.items() if d <= spatial.max_distance), key=lambda r: (r[1], -r[0]))
    radius = _FIRST_RADIUS
    while radius <= _MAX_RADIUS:
        q, p = _query(req, spatial, radius, now, half_life_s)
        found = _distances(conn, q, p, spatial.target)
        inside = [(m, d) for m, d in found.items() if d <= radius]
        if len(inside) >= need:
            return sorted(inside, key=lambda r: (r[1], -r[0]))
        radius *= _GROWTH
    q, p = _query(req, spatial, None, now, half_life_s)
    return sorted(_distances(conn, q, p, spatial.target).items(), key=lambda r: (r[1], -r[0]))
