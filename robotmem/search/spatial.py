"""Nearest-first recall over the R*Tree of context points (robotmem.store.points).

A box around the target grows (x2 each step) until it holds enough eligible points
whose exact distance is within the box's half-width: every point outside the box is
farther than that, so those are exactly the nearest. Eligibility (exact filters
included) is checked on the points inside the box only, nearest first and in growing
chunks, so a broad filter reads the rows of about ``need / share`` points, not of the
whole box. A selective filter's exact result (a few memories, read through the leaf
index) has its points read by tree row id instead: no walk at all.

On SQLite a point's field and exact coordinates sit beside the R*Tree (in ``points``, under
the tree row's id), one row lookup each: at a million memories reading them for the 956 points of
a box took 3.5 ms, listing the box's tree rows alone 0.9 ms. So the box lists its rows with
their 32-bit boxes, which R*Tree rounds outward and so hold the exact point: the distance to
that box is a lower bound of the point's. Field and exact coordinates are read nearest bound
first, in growing chunks, until the answer's last point is nearer than every unread bound.

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

from ..store.points import exact_points, memory_of_point, points_of
from . import sql
from .request import RecallRequest, SpatialSort

__all__ = ["DIRECT_LIMIT", "distance_key", "nearest", "nearest_sqlite", "walk_trees"]

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
    """A point in another frame has no distance to the target (its numbers mean another place).

    A frame named by no string (an array, an object, a number) is another frame, as on PostgreSQL:
    json_extract gives an array or object as its JSON text, so ``["map"]`` matched the frame
    '["map"]'. A missing or null frame is unknown: compared."""
    if spatial.frame is None:
        return "", []
    return (" AND CASE coalesce(json_type(m.context, ?), 'null') WHEN 'null' THEN 1 "
            "WHEN 'text' THEN json_extract(m.context, ?) = ? ELSE 0 END",
            [spatial.frame_path, spatial.frame_path, spatial.frame])


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


def distance_key(distance: float) -> float:
    """A distance as compared for order and ties: two computations of one distance (numpy here,
    PostgreSQL's there, a bound against an exact value) may differ in the last bits."""
    return round(distance, 9)


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

    def eligible(self, memory_ids: list[int]) -> set[int]:
        """Which of ``memory_ids`` the request may return."""
        if self._accept is None:
            return set(memory_ids)
        unknown = [m for m in memory_ids if m not in self._seen]
        if unknown:
            ok = self._accept(unknown)
            self._seen.update((m, m in ok) for m in unknown)
        return {m for m in memory_ids if self._seen[m]}

    def keep(self, ranked: list[tuple[int, float]], need: int | None) -> list[tuple[int, float]]:
        """The eligible points of ``ranked`` (nearest first): the first ``need`` and all as near as
        the last of them (every one for None)."""
        if self._accept is None:
            return ranked
        out: list[tuple[int, float]] = []
        start, step = 0, max(16, 4 * (need or 0))
        while start < len(ranked):
            if need is not None and len(out) >= need and distance_key(ranked[start][1]) > distance_key(out[need - 1][1]):
                break
            chunk = ranked[start : start + step]
            ok = self.eligible([m for m, _ in chunk])
            out += [(m, d) for m, d in chunk if m in ok]
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

    def within(radius: float | None, at_least: int | None) -> list[tuple[int, float]]:
        q, p = points_query(req, spatial, radius, now, half_life_s)
        found = _distances(conn.execute(q, p), spatial.target)
        return verdicts.keep(_by_distance(found, math.inf if radius is None else radius), at_least)

    return _growing(spatial, need, within)


_Within = Callable[["float | None", "int | None"], list[tuple[int, float]]]


def _growing(spatial: SpatialSort, need: int, within: _Within) -> list[tuple[int, float]]:
    """``within(radius, need)``: the eligible (memory_id, distance) at most ``radius`` away (any
    distance for None), nearest first, at least the first ``need`` of them (all for None)."""
    if spatial.max_distance is not None:
        return within(spatial.max_distance, None)
    radius = _FIRST_RADIUS
    while radius <= _MAX_RADIUS:
        inside = within(radius, need)
        if len(inside) >= need:
            return inside
        radius *= _GROWTH
    return within(None, None)


def walk_trees(conn: apsw.Connection, spatial: SpatialSort, need: int, accept: Accept | None) -> list[tuple[int, float]]:
    """:func:`nearest` on SQLite's R*Trees, reading each point's field and exact coordinates only
    where its tree box's lower bound can still place it in the answer and its memory is eligible."""
    return _growing(spatial, need, _TreeWalk(conn, spatial, _Verdicts(accept)).within)


class _TreeWalk:
    """SQLite's box: tree rows listed with their 32-bit boxes, field and exact coordinates read
    only for the rows whose lower bound can still place them in the answer (module docstring)."""

    def __init__(self, conn: apsw.Connection, spatial: SpatialSort, verdicts: _Verdicts) -> None:
        self._conn = conn
        self._spatial = spatial
        self._verdicts = verdicts
        self._target = np.asarray(spatial.target, dtype=np.float64)
        #: Tree row id -> (memory_id, exact distance), None for a point of another field.
        self._exact: dict[int, tuple[int, float] | None] = {}

    def within(self, radius: float | None, need: int | None) -> list[tuple[int, float]]:
        ids, bounds = self._bounds(radius)
        limit = math.inf if radius is None else radius
        best: dict[int, float] = {}
        # The first chunk just over ``need``: reading a row's field and coordinates by id costs about as
        # much as listing them in the box (6.5 against 4.7 us a row at 1M), so reading 4 x need first
        # made a plain spatial recall slower than listing the whole first box.
        start, step = 0, (need or 0) + 16
        while start < len(ids):
            if need is not None and len(best) >= need:
                last = sorted(best.values())[need - 1]
                if distance_key(float(bounds[start])) > distance_key(last):
                    break
            chunk = ids[start : start + step].tolist()
            # Eligibility first, from the row ids alone: a filter that passes few memories leaves
            # few points whose field and coordinates must be read.
            ok = self._verdicts.eligible(list(dict.fromkeys(map(memory_of_point, chunk))))
            wanted = [t for t in chunk if memory_of_point(t) in ok]
            self._resolve(wanted)
            for memory_id, distance in (hit for t in wanted if (hit := self._exact[t]) is not None):
                if distance <= limit and distance < best.get(memory_id, math.inf):
                    best[memory_id] = distance
            start, step = start + len(chunk), step * 4
        ranked = _by_distance(best)
        if start < len(ids):  # an unread point may be as near as its bound: only what is nearer is in order
            unread = distance_key(float(bounds[start]))
            ranked = [(m, d) for m, d in ranked if distance_key(d) < unread]
        return ranked

    def _bounds(self, radius: float | None) -> tuple[np.ndarray, np.ndarray]:
        """The box's tree rows (every field's), by the lower bound of their distance, nearest first."""
        box, params = _box(self._spatial, radius)
        rows = self._conn.execute(
            f"SELECT r.id, r.minx, r.maxx, r.miny, r.maxy, r.minz, r.maxz FROM spatial_boxes r WHERE 1{box}", params
        ).fetchall()
        table = np.asarray(rows, dtype=np.float64).reshape(-1, 7)
        axes = len(self._target)
        low, high = table[:, 1 : 1 + 2 * axes : 2], table[:, 2 : 2 + 2 * axes : 2]
        gap = np.maximum(np.maximum(low - self._target, self._target - high), 0.0)
        bounds = np.sqrt(np.einsum("ij,ij->i", gap, gap))
        ids = table[:, 0].astype(np.int64)
        if radius is not None:
            ids, bounds = ids[bounds <= radius], bounds[bounds <= radius]
        order = np.argsort(bounds, kind="stable")
        return ids[order], bounds[order]

    def _resolve(self, tree_ids: list[int]) -> None:
        """Read the field and exact point of the tree rows not read yet."""
        unknown = [t for t in tree_ids if t not in self._exact]
        if not unknown:
            return
        self._exact.update((t, None) for t in unknown)
        rows = [row for row in exact_points(self._conn, unknown) if row[2] == self._spatial.field]
        if not rows:
            return
        points = np.asarray([row[3:] for row in rows], dtype=np.float64)[:, : len(self._target)] - self._target
        distances = np.sqrt(np.einsum("ij,ij->i", points, points)).tolist()
        self._exact.update((row[0], (row[1], d)) for row, d in zip(rows, distances))


def nearest_sqlite(conn: apsw.Connection, req: RecallRequest, now: float, half_life_s: float, need: int,
                   chosen: np.ndarray | None = None) -> list[tuple[int, float]]:
    """:func:`nearest` over SQLite's R*Tree; ``chosen``: every eligible memory, when a selective
    filter computed them (few: their points are read directly; more: they decide eligibility)."""
    spatial = req.spatial
    assert spatial is not None
    accept = _accept_sqlite(conn, req, now, half_life_s, chosen)
    if chosen is None or len(chosen) > DIRECT_LIMIT:
        return walk_trees(conn, spatial, need, accept)
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
