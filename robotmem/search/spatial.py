"""Nearest-first recall over the R*Tree of context points (robotmem.store.points).

A box around the target grows (x2 each step) until it holds enough eligible points
whose exact distance is within the box's half-width: every point outside the box is
farther than that, so those are exactly the nearest. Eligibility (exact filters
included) is checked on the points inside the box only, nearest first and in growing
chunks, so a broad filter reads the rows of about ``need / share`` points, not of the
whole box. A selective filter's exact result (a few memories, read through the leaf
index) has its points read by tree row id instead: no walk at all.

With ``spatial_sort.frame``, a memory whose ``frame`` (beside the sorted field:
``spatial.position`` -> ``spatial.frame``) names another frame is not compared by
distance: without ``max_distance`` it comes after the compared ones (as memories without
the field do), with ``max_distance`` it is left out. A memory that names no frame is
compared (its frame is unknown, as before frames were recorded).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import apsw
import numpy as np

from ..store.points import points_of
from . import sql
from .request import RecallRequest, SpatialSort

__all__ = ["DIRECT_LIMIT", "nearest", "nearest_sqlite"]

#: A selective filter leaving at most this many memories reads their points by id instead of walking the tree.
DIRECT_LIMIT = 1024

_FIRST_RADIUS = 0.25
_GROWTH = 2.0
_MAX_RADIUS = 1e6


def _box(spatial: SpatialSort, radius: float | None) -> tuple[str, list[Any]]:
    """The R*Tree condition for the box of half-width ``radius`` around the target (none for None)."""
    if radius is None:
        return "", []
    axes = ("x", "y", "z")[: len(spatial.target)]
    params: list[Any] = []
    for value in spatial.target:
        params += [value - radius, value + radius]
    return "".join(f" AND r.max{a} >= ? AND r.min{a} <= ?" for a in axes), params


def _frame_sql(spatial: SpatialSort) -> tuple[str, list[Any]]:
    """A point in another frame has no distance to the target (its numbers mean another place)."""
    if spatial.frame is None:
        return "", []
    return " AND coalesce(json_extract(m.context, ?), ?) = ?", [spatial.frame_path, spatial.frame, spatial.frame]


def _points_in_box(req: RecallRequest, spatial: SpatialSort, radius: float | None, now: float,
                   half_life_s: float) -> tuple[str, list[Any]]:
    """Every point of the field inside the box, eligible or not (SQLite: checked later, nearest first)."""
    box, box_params = _box(spatial, radius)
    return (f"SELECT r.memory_id, r.px, r.py, r.pz FROM spatial_points r WHERE r.field = ?{box}",
            [spatial.field, *box_params])


def _distances(rows: Iterable[tuple[Any, ...]], target: tuple[float, ...]) -> dict[int, float]:
    """Each memory's distance to the target: the nearest of its points (rows of memory_id, x, y, z).

    In numpy: a box holds hundreds to thousands of points, and a Python loop over them was the
    larger part of a spatial recall at a million memories."""
    table = np.asarray(rows if isinstance(rows, list) else list(rows), dtype=np.float64)
    if table.size == 0:
        return {}
    diff = table[:, 1 : 1 + len(target)] - np.asarray(target, dtype=np.float64)
    distance = np.sqrt(np.einsum("ij,ij->i", diff, diff))
    ids = table[:, 0].astype(np.int64)
    order = np.argsort(distance, kind="stable")
    # np.unique keeps each id's first place in distance order: its nearest point.
    unique, first = np.unique(ids[order], return_index=True)
    return dict(zip(unique.tolist(), distance[order][first].tolist()))


def _by_distance(found: dict[int, float], limit: float = math.inf) -> list[tuple[int, float]]:
    return sorted(((m, d) for m, d in found.items() if d <= limit), key=lambda r: (r[1], -r[0]))


PointsQuery = Callable[[RecallRequest, SpatialSort, "float | None", float, float], "tuple[str, list[Any]]"]
#: Which of the given memory ids a request may return.
Accept = Callable[[list[int]], set[int]]


class _Verdicts:
    """Eligibility checked on the nearest points first, in growing chunks, remembered across boxes."""

    def __init__(self, accept: Accept | None) -> None:
        self._accept = accept
        self._seen: dict[int, bool] = {}

    def keep(self, ranked: list[tuple[int, float]], need: int | None) -> list[tuple[int, float]]:
        """The eligible points of ``ranked`` (nearest first): the first ``need`` and all as near as
        the last of them (every one for None)."""
        if self._accept is None:
            return ranked
        out: list[tuple[int, float]] = []
        start, step = 0, max(16, 4 * (need or 0))
        while start < len(ranked):
            if need is not None and len(out) >= need and round(ranked[start][1], 9) > round(out[need - 1][1], 9):
                break
            chunk = ranked[start : start + step]
            unknown = [m for m, _ in chunk if m not in self._seen]
            if unknown:
                ok = self._accept(unknown)
                self._seen.update((m, m in ok) for m in unknown)
            out += [(m, d) for m, d in chunk if self._seen[m]]
            start, step = start + len(chunk), step * 4
        return out


def nearest(conn: Any, req: RecallRequest, now: float, half_life_s: float,
            need: int, points_query: PointsQuery, accept: Accept | None = None) -> list[tuple[int, float]]:
    """At least ``need`` (when that many exist) eligible (memory_id, distance), nearest first.

    ``points_query(req, spatial, radius, now, half_life_s)`` selects (memory_id, x, y, z) of the
    points inside the box of half-width ``radius`` (all of them for None); ``accept``, when
    given, says which are eligible (else the query selected eligible points only).
    robotmem.search.postgres passes PostgreSQL's GiST query, which checks eligibility itself.
    """
    spatial = req.spatial
    assert spatial is not None
    verdicts = _Verdicts(accept)

    def points(radius: float | None) -> dict[int, float]:
        q, p = points_query(req, spatial, radius, now, half_life_s)
        return _distances(conn.execute(q, p), spatial.target)

    if spatial.max_distance is not None:
        return verdicts.keep(_by_distance(points(spatial.max_distance), spatial.max_distance), None)
    radius = _FIRST_RADIUS
    while radius <= _MAX_RADIUS:
        inside = verdicts.keep(_by_distance(points(radius), radius), need)
        if len(inside) >= need:
            return inside
        radius *= _GROWTH
    return verdicts.keep(_by_distance(points(None)), None)


def nearest_sqlite(conn: apsw.Connection, req: RecallRequest, now: float, half_life_s: float, need: int,
                   chosen: np.ndarray | None = None) -> list[tuple[int, float]]:
    """:func:`nearest` over SQLite's R*Tree; ``chosen``: every eligible memory, when a selective
    filter computed them (few: their points are read directly; more: they decide eligibility)."""
    spatial = req.spatial
    assert spatial is not None
    accept = _accept_sqlite(conn, req, now, half_life_s, chosen)
    if chosen is None or len(chosen) > DIRECT_LIMIT:
        return nearest(conn, req, now, half_life_s, need, _points_in_box, accept)
    found = _by_distance(_distances(points_of(conn, chosen.tolist(), spatial.field), spatial.target),
                         math.inf if spatial.max_distance is None else spatial.max_distance)
    return _Verdicts(accept).keep(found, None)


def _accept_sqlite(conn: apsw.Connection, req: RecallRequest, now: float, half_life_s: float,
                   chosen: np.ndarray | None) -> Accept | None:
    """Eligibility (and the frame) of a few memories: by SQL, or by membership in ``chosen``."""
    assert req.spatial is not None
    frame, frame_params = _frame_sql(req.spatial)
    members = None if chosen is None else set(chosen.tolist())
    if members is not None and not frame:
        return lambda ids: {m for m in ids if m in members}
    where, params = ("1", []) if members is not None else sql.eligibility_sql(req, now, half_life_s)

    def accept(ids: list[int]) -> set[int]:
        ids = ids if members is None else [m for m in ids if m in members]
        if not ids:
            return set()
        rows = conn.execute(
            f"SELECT m.id FROM json_each(?) AS j CROSS JOIN memories m ON m.id = j.value WHERE {where}{frame}",
            ["[" + ",".join(map(str, ids)) + "]", *params, *frame_params],
        )
        return {int(row[0]) for row in rows}

    return accept
