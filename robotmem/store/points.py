"""The spatial index: every point-like value of a context, in an R*Tree.

A point is a list of 2 or 3 finite numbers (``[x, y]``, ``[x, y, z]``) or an object
with numeric ``x`` and ``y`` (and optionally ``z``), at any dot path of the context up
to ``MAX_DEPTH`` levels deep. 2-D points sit at z = 0. The R*Tree answers "what lies
inside this box" in logarithmic time; spatial recall grows a box around the target
until it holds enough eligible points, then sorts them by exact distance (the exact
coordinates are kept beside the tree's 32-bit boxes).
"""

from __future__ import annotations

import json
import math
from typing import Any, cast

import apsw

__all__ = ["MAX_DEPTH", "extract_points", "index_new_points", "index_points", "points_of", "reindex_all_points"]

MAX_DEPTH = 4
#: Tree row ids are ``memory_id * _MAX_POINTS + k``, so one memory's points are one rowid range.
_MAX_POINTS = 64


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _as_point(value: Any) -> tuple[float, float, float] | None:
    if isinstance(value, list):
        if len(value) not in (2, 3) or not all(map(_number, value)):
            return None
        return (float(value[0]), float(value[1]), float(value[2]) if len(value) == 3 else 0.0)
    if isinstance(value, dict) and _number(value.get("x")) and _number(value.get("y")):
        z = value.get("z", 0.0)
        return (float(value["x"]), float(value["y"]), float(z) if _number(z) else 0.0)
    return None


def extract_points(context: dict[str, Any]) -> list[tuple[str, tuple[float, float, float]]]:
    """(dot path, point) for every point-like value in the context, depth first, at most ``_MAX_POINTS``."""
    found: list[tuple[str, tuple[float, float, float]]] = []
    _collect_points(context, "", 1, found)
    return found


def _collect_points(node: dict[str, Any], prefix: str, depth: int,
                    found: list[tuple[str, tuple[float, float, float]]]) -> bool:
    """Append the points under ``node`` to ``found``; False once it holds ``_MAX_POINTS``.

    Plain recursion, no generators: it runs for every memory a bulk insert writes."""
    for key, value in node.items():
        if not isinstance(value, (dict, list)):
            continue  # a scalar is neither a point nor holds one
        path = f"{prefix}.{key}" if prefix else key
        point = _as_point(value)
        if point is not None:
            found.append((path, point))
            if len(found) >= _MAX_POINTS:
                return False
        elif isinstance(value, dict) and depth < MAX_DEPTH and not _collect_points(value, path, depth + 1, found):
            return False
    return True


def index_points(conn: apsw.Connection, memory_id: int, context: dict[str, Any], *, fresh: bool = False) -> None:
    """Replace the memory's points with those of ``context`` (``fresh``: it has none yet)."""
    if not fresh:
        # The R*Tree looks rows up by id equality only (a rowid range would scan the tree).
        first = memory_id * _MAX_POINTS
        conn.executemany("DELETE FROM spatial_points WHERE id = ?", [(first + k,) for k in range(_MAX_POINTS)])
    index_new_points(conn, [(memory_id, context)])


def index_new_points(conn: apsw.Connection, memories: list[tuple[int, dict[str, Any]]]) -> None:
    """The points of memories that have none yet, in one statement."""
    rows = [
        (memory_id * _MAX_POINTS + k, x, x, y, y, z, z, memory_id, field, x, y, z)
        for memory_id, context in memories
        for k, (field, (x, y, z)) in enumerate(extract_points(context))
    ]
    if rows:
        conn.executemany(
            "INSERT INTO spatial_points (id, minx, maxx, miny, maxy, minz, maxz, memory_id, field, px, py, pz) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )


def points_of(conn: apsw.Connection, memory_ids: list[int], field: str) -> list[tuple[int, float, float, float]]:
    """(memory_id, x, y, z) of the given memories' points at ``field``, by tree row id.

    A memory's k-th point is row ``memory_id * _MAX_POINTS + k`` (k from 0, no gaps), so
    each round asks for the next k of the memories that had one: equality lookups only.
    """
    found: list[tuple[int, float, float, float]] = []
    keys = [m * _MAX_POINTS for m in memory_ids]
    while keys:
        rows = cast(list[tuple[int, int, str, float, float, float]], conn.execute(
            "SELECT id, memory_id, field, px, py, pz FROM spatial_points WHERE id IN (SELECT value FROM json_each(?))",
            ("[" + ",".join(map(str, keys)) + "]",),
        ).fetchall())
        found += [(m, x, y, z) for _, m, f, x, y, z in rows if f == field]
        keys = [k + 1 for k, *_ in rows if (k + 1) % _MAX_POINTS]
    return found


def reindex_all_points(conn: apsw.Connection) -> None:
    """Backfill for stores created before the spatial index existed."""
    rows = conn.execute("SELECT id, json(context) FROM memories").fetchall()
    index_new_points(conn, [(cast(int, memory_id), json.loads(cast(str, context))) for memory_id, context in rows])
