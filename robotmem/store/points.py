"""The spatial index: every point-like value of a context, in R*Trees.

A point is a list of 2 or 3 numbers (``[x, y]``, ``[x, y, z]``) or an object with
numeric ``x`` and ``y`` (and optionally ``z``), every coordinate finite and at most
``MAX_COORDINATE`` in magnitude, at any dot path of the context up
to ``MAX_DEPTH`` levels deep. 2-D points sit at z = 0. The R*Tree answers "what lies
inside this box" in logarithmic time; spatial recall grows a box around the target
until it holds enough eligible points, then sorts them by exact distance (the exact
coordinates are kept beside the tree's 32-bit boxes).

One R*Tree per epoch of memory ids (``spatial_points_e<n>``, n = memory id >> ``EPOCH_BITS``,
made when the epoch's first point arrives) holds each point's box under its id; the plain table
``points`` holds, under the same id, its memory, field and exact coordinates (migration 16). The
view ``spatial_boxes`` is the trees' UNION ALL (SQLite pushes a box down into every tree) and
``spatial_points`` joins it to ``points``. The exact columns were the trees' auxiliary columns
before: those live in each tree's rowid table, which a node split rewrites row by row (in one
batch of 1,000 points at a million memories, 235 pages of it); in ``points`` they are appended
(ids only grow), about 20 pages a batch; a whole batch of 1,000 memories wrote 1,499 WAL frames
instead of 1,745.

A point goes into a tree of at most 65,536 memories, not one of every memory: inserting 1,000
points into one tree of 1,150,000 took 83 ms and dirtied 2,100 pages; into a full tree of
65,536, 43 ms and 1,229 pages; of 16,384, 21 ms and 630 pages. Each tree adds a little to a
box query: at 1,000,000 memories, a box holding 1,061 points took 3.4-3.8 ms from one tree,
3.9-5.7 ms from 16 trees and 5.0-7.1 ms from 31, so the trees are not smaller than this.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, cast

import apsw

from ..context import load_stored_json

__all__ = ["EPOCH_BITS", "MAX_COORDINATE", "MIN_COORDINATE", "MAX_DEPTH", "MAX_DISTANCE", "MAX_POINTS", "delete_points", "exact_points", "extract_points", "index_coordinate", "index_new_points", "index_points",
           "memory_of_point", "move_exact_columns_out", "points_of", "reindex_all_points", "reindex_changed_points",
           "split_points_by_epoch"]

MAX_DEPTH = 4
#: The largest coordinate magnitude of a point (metres, if the context speaks metres: beyond any
#: robot's workspace). A list or object with a larger number is kept in the context but is no
#: point: PostgreSQL's GiST index overflows on coordinates near 1e154 (its penalty squares
#: them) and refuses every later write into that index page, and both stores' distances
#: overflow beyond it.
MAX_COORDINATE = 1e15
#: Coordinates of smaller magnitude are indexed as 0 (the context keeps them as given): the
#: GiST index of PostgreSQL multiplies differences of coordinates, and a product too small for a
#: double is an underflow error there, so once it held points at 1e-300 (tiny boxes) every later
#: write of a point into that part of the index failed; at 1e-100 m the squares of differences
#: (ulp 1e-116) stay far above the smallest double.
MIN_COORDINATE = 1e-100
#: The largest ``spatial_sort.max_distance``: more than two points within MAX_COORDINATE can be apart.
MAX_DISTANCE = 4e15
#: Tree row ids of a memory's first points are ``memory_id * _MAX_POINTS + k``, one rowid range.
_MAX_POINTS = 64
#: Its points after the first ``_MAX_POINTS`` (a map of 70 shelf positions) take ids of a range of
#: their own below zero, ``-(memory_id << _OVERFLOW_BITS) - 1 - j``: the ids above stay as stores
#: hold them. Before, the points after the 64th were left out of the index, so spatial_sort
#: silently missed a memory on them that a filter found. 2**16 more hold every point a context can
#: (CONTEXT_MAX_BYTES is 64 KiB, a point with its key at least 10 bytes of it).
_OVERFLOW_BITS = 16
#: The most points of one context the index holds (both stores; PostgreSQL's rows need no ids).
MAX_POINTS = _MAX_POINTS + (1 << _OVERFLOW_BITS)
#: Memory ids per R*Tree.
EPOCH_BITS = 16
_TREE = re.compile(r"spatial_points_e(\d+)")
_BOX_COLUMNS = "id, minx, maxx, miny, maxy, minz, maxz"
_EXACT_COLUMNS = "id, memory_id, field, px, py, pz"
#: A point row as the view ``spatial_points`` gives it: the box's columns, then the exact ones.
_COLUMNS = _BOX_COLUMNS + _EXACT_COLUMNS.removeprefix("id")
_CREATE_TREE = f"CREATE VIRTUAL TABLE {{name}} USING rtree({_BOX_COLUMNS})"
_INSERT_BOXES = f"INSERT INTO {{table}} ({_BOX_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
_INSERT_EXACT = f"INSERT INTO points ({_EXACT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
_CREATE_POINTS = """CREATE TABLE IF NOT EXISTS points (
    id        INTEGER PRIMARY KEY,  -- the point's row id in its epoch's R*Tree
    memory_id INTEGER NOT NULL,
    field     TEXT NOT NULL,        -- dot path of the point in the memory's context
    px REAL NOT NULL, py REAL NOT NULL, pz REAL NOT NULL  -- exact; the tree's boxes are 32-bit
)"""
#: The views over the trees: CROSS JOIN keeps the trees the outer loop (a box first, then its rows).
_CREATE_VIEWS = f"""
DROP VIEW IF EXISTS spatial_points;
DROP VIEW IF EXISTS spatial_boxes;
CREATE VIEW spatial_boxes AS {{members}};
CREATE VIEW spatial_points AS
    SELECT b.id, b.minx, b.maxx, b.miny, b.maxy, b.minz, b.maxz, p.memory_id, p.field, p.px, p.py, p.pz
    FROM spatial_boxes AS b CROSS JOIN points AS p ON p.id = b.id;
"""


def _number(value: Any) -> bool:
    """A coordinate: a finite number of magnitude at most ``MAX_COORDINATE``."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and -MAX_COORDINATE <= value <= MAX_COORDINATE)


def index_coordinate(value: float) -> float:
    """A coordinate as the index holds it (and a spatial_sort target is compared): 0 below MIN_COORDINATE."""
    return 0.0 if abs(value) < MIN_COORDINATE else float(value)


def _as_point(value: Any) -> tuple[float, float, float] | None:
    point = _exact_point(value)
    return None if point is None else (index_coordinate(point[0]), index_coordinate(point[1]),
                                       index_coordinate(point[2]))


def _exact_point(value: Any) -> tuple[float, float, float] | None:
    if isinstance(value, list):
        if len(value) not in (2, 3) or not all(map(_number, value)):
            return None
        return (float(value[0]), float(value[1]), float(value[2]) if len(value) == 3 else 0.0)
    if isinstance(value, dict) and _number(value.get("x")) and _number(value.get("y")):
        z = value.get("z", 0.0)
        if _number(z):
            return (float(value["x"]), float(value["y"]), float(z))
        if isinstance(z, (int, float)) and not isinstance(z, bool):
            return None  # a number out of bounds, as in a list
        return (float(value["x"]), float(value["y"]), 0.0)
    return None


def extract_points(context: dict[str, Any]) -> list[tuple[str, tuple[float, float, float]]]:
    """(dot path, point) for every point-like value in the context, depth first, at most ``MAX_POINTS``.

    A key holding a dot is no step of a dot path (data-model.md: a filter cannot name it), so
    nothing under it is a point: its path would read as another, nested one."""
    found: list[tuple[str, tuple[float, float, float]]] = []
    _collect_points(context, "", 1, found)
    return found


def _collect_points(node: dict[str, Any], prefix: str, depth: int,
                    found: list[tuple[str, tuple[float, float, float]]]) -> bool:
    """Append the points under ``node`` to ``found``; False once it holds ``MAX_POINTS``.

    Plain recursion, no generators: it runs for every memory a bulk insert writes."""
    for key, value in node.items():
        if not isinstance(value, (dict, list)) or "." in key:
            continue  # a scalar is neither a point nor holds one; a dotted key no path can name
        path = f"{prefix}.{key}" if prefix else key
        point = _as_point(value)
        if point is not None:
            found.append((path, point))
            if len(found) >= MAX_POINTS:
                return False
        # A point object's other keys may hold points too ({"x": 5, "y": 5, "goal": [0, 0]}): a
        # filter finds spatial.pose.goal, so spatial_sort must (skipped before SQLite migration 21, PG 9).
        if isinstance(value, dict) and depth < MAX_DEPTH and not _collect_points(value, path, depth + 1, found):
            return False
    return True


def _tree(epoch: int) -> str:
    return f"spatial_points_e{epoch}"


def _trees(conn: apsw.Connection) -> set[int]:
    """The epochs that have an R*Tree."""
    # The GLOB also finds each tree's shadow tables (spatial_points_e0_node, ...); the pattern does not.
    names = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB 'spatial_points_e*'")
    return {int(m.group(1)) for (name,) in names if (m := _TREE.fullmatch(str(name)))}


def _make_trees(conn: apsw.Connection, epochs: set[int]) -> None:
    """Make the R*Trees of ``epochs`` that are missing, and the views over all of them anew."""
    existing = _trees(conn)
    if epochs <= existing:
        return
    for epoch in sorted(epochs - existing):
        conn.execute(_CREATE_TREE.format(name=_tree(epoch)))
    conn.execute(_CREATE_POINTS)
    members = " UNION ALL ".join(f"SELECT {_BOX_COLUMNS} FROM {_tree(e)}" for e in sorted(existing | epochs))
    conn.execute(_CREATE_VIEWS.format(members=members))


def split_points_by_epoch(conn: apsw.Connection) -> None:
    """Migration 15: the epoch R*Trees in place of migration 3's one tree (``spatial_points``
    becomes their view), its rows moved in one pass. Safe to run again (tests rewind user_version)."""
    kind = conn.execute("SELECT type FROM sqlite_master WHERE name = 'spatial_points'").fetchall()
    if kind != [("table",)]:
        return
    conn.execute("ALTER TABLE spatial_points RENAME TO spatial_points_one_tree")
    # Every tree made before rows are read: no schema change while the old tree is being read.
    epochs = {cast(int, e) for (e,) in conn.execute(
        f"SELECT DISTINCT memory_id >> {EPOCH_BITS} FROM spatial_points_one_tree").fetchall()}
    _make_trees(conn, epochs | {0})
    batch: list[tuple[Any, ...]] = []
    for row in conn.execute(f"SELECT {_COLUMNS} FROM spatial_points_one_tree"):
        batch.append(tuple(row))
        if len(batch) == 50_000:
            _insert_rows(conn, batch)
            batch = []
    _insert_rows(conn, batch)
    conn.execute("DROP TABLE spatial_points_one_tree")


def move_exact_columns_out(conn: apsw.Connection) -> None:
    """Migration 16: each epoch tree made by migration 15 with the exact columns beside it
    (R*Tree auxiliary columns) becomes a tree of boxes alone and rows of ``points``. Safe to run
    again (tests rewind user_version): a tree of boxes alone is left as it is."""
    aux = sorted(int(m.group(1)) for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB 'spatial_points_e*' "
        "AND sql LIKE '%+memory_id%'") if (m := _TREE.fullmatch(str(name))))
    if not aux:
        return
    conn.execute("DROP VIEW IF EXISTS spatial_points")
    for epoch in aux:
        conn.execute(f"ALTER TABLE {_tree(epoch)} RENAME TO spatial_points_aux{epoch}")
    # Every tree (and ``points``) made before rows are read: no schema change while an old tree is read.
    _make_trees(conn, set(aux) | {0})
    for epoch in aux:
        old = f"spatial_points_aux{epoch}"
        conn.execute(f"INSERT INTO {_tree(epoch)} ({_BOX_COLUMNS}) SELECT {_BOX_COLUMNS} FROM {old}")
        conn.execute(f"INSERT INTO points ({_EXACT_COLUMNS}) SELECT {_EXACT_COLUMNS} FROM {old}")
        conn.execute(f"DROP TABLE {old}")


def index_points(conn: apsw.Connection, memory_id: int, context: dict[str, Any], *, fresh: bool = False) -> None:
    """Replace the memory's points with those of ``context`` (``fresh``: it has none yet)."""
    if not fresh and memory_id >> EPOCH_BITS in _trees(conn):
        delete_points(conn, [memory_id])
    index_new_points(conn, [(memory_id, context)])


def delete_points(conn: apsw.Connection, memory_ids: list[int]) -> None:
    """Every point of the memories (a purge deletes them): their rows of ``points`` found by id
    range, then each box from its epoch's tree by id (the R*Tree looks rows up by id equality only)."""
    if not memory_ids or conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'points'"
                                      ).fetchone() is None:
        return
    ranges = [r for m in memory_ids for r in ((m * _MAX_POINTS, m * _MAX_POINTS + _MAX_POINTS - 1),
                                             _overflow_range(m))]
    found = [(cast(int, pid), cast(int, m)) for lo, hi in ranges
             for pid, m in conn.execute("SELECT id, memory_id FROM points WHERE id BETWEEN ? AND ?", (lo, hi))]
    trees = _trees(conn)
    by_epoch: defaultdict[int, list[tuple[int]]] = defaultdict(list)
    for pid, m in found:
        by_epoch[m >> EPOCH_BITS].append((pid,))
    for epoch, ids in by_epoch.items():
        if epoch in trees:
            conn.executemany(f"DELETE FROM {_tree(epoch)} WHERE id = ?", ids)
    conn.executemany("DELETE FROM points WHERE id = ?", [(pid,) for pid, _ in found])


def index_new_points(conn: apsw.Connection, memories: list[tuple[int, dict[str, Any]]]) -> None:
    """The points of memories that have none yet, one statement per R*Tree."""
    _insert_rows(conn, _point_rows(memories))


def _point_rows(memories: Iterable[tuple[int, dict[str, Any]]]) -> list[tuple[Any, ...]]:
    """The memories' points as rows of ``_COLUMNS``."""
    return [
        (_point_id(memory_id, k), x, x, y, y, z, z, memory_id, field, x, y, z)
        for memory_id, context in memories
        for k, (field, (x, y, z)) in enumerate(extract_points(context))
    ]


def _point_id(memory_id: int, k: int) -> int:
    """The tree row id of a memory's k-th point (from 0)."""
    if k < _MAX_POINTS:
        return memory_id * _MAX_POINTS + k
    return -(memory_id << _OVERFLOW_BITS) - 1 - (k - _MAX_POINTS)


def _overflow_range(memory_id: int) -> tuple[int, int]:
    """The ids (lowest, highest) of a memory's points after its first ``_MAX_POINTS``."""
    highest = -(memory_id << _OVERFLOW_BITS) - 1
    return highest - (1 << _OVERFLOW_BITS) + 1, highest


def _insert_rows(conn: apsw.Connection, rows: list[tuple[Any, ...]]) -> None:
    """Rows of ``_COLUMNS``: each box into its memory's epoch tree, the exact columns into ``points``."""
    if not rows:  # most memories have no point: no look at the schema for them
        return
    by_epoch: defaultdict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows:
        by_epoch[int(row[7]) >> EPOCH_BITS].append(row[:7])
    _make_trees(conn, set(by_epoch))
    for epoch, boxes in by_epoch.items():
        conn.executemany(_INSERT_BOXES.format(table=_tree(epoch)), boxes)
    conn.executemany(_INSERT_EXACT, [(row[0], *row[7:]) for row in rows])


def points_of(conn: apsw.Connection, memory_ids: list[int], field: str) -> list[tuple[int, float, float, float]]:
    """(memory_id, x, y, z) of the given memories' points at ``field``, by tree row id.

    A memory's k-th point is row ``memory_id * _MAX_POINTS + k`` (k from 0, no gaps), so
    each round asks for the next k of the memories that had one: equality lookups only. A
    memory with a point in every one of those rows may have more: their range is read at once.
    """
    found: list[tuple[int, float, float, float]] = []
    keys = [m * _MAX_POINTS for m in memory_ids]
    full: list[int] = []
    while keys:
        rows = exact_points(conn, keys)
        found += [(m, x, y, z) for _, m, f, x, y, z in rows if f == field]
        keys = [k + 1 for k, *_ in rows if (k + 1) % _MAX_POINTS]
        full += [k // _MAX_POINTS for k, *_ in rows if not (k + 1) % _MAX_POINTS]
    for memory_id in full:
        more = conn.execute("SELECT memory_id, px, py, pz FROM points WHERE id BETWEEN ? AND ? AND field = ?",
                            (*_overflow_range(memory_id), field))
        found += [(int(m), float(x), float(y), float(z)) for m, x, y, z in more]
    return found


def memory_of_point(tree_id: int) -> int:
    """The memory a tree row belongs to (its id is ``memory_id * _MAX_POINTS + k``, or below zero
    for a point after the first ``_MAX_POINTS``: see ``_point_id``)."""
    return tree_id // _MAX_POINTS if tree_id >= 0 else (-tree_id - 1) >> _OVERFLOW_BITS


def exact_points(conn: apsw.Connection, tree_ids: list[int]) -> list[tuple[int, int, str, float, float, float]]:
    """(tree row id, memory_id, field, x, y, z) of the given tree rows: the exact coordinates and
    the field live in ``points`` under the tree row's id, one row lookup each, so a box query
    reads them only for the rows it has to."""
    return cast(list[tuple[int, int, str, float, float, float]], conn.execute(
        f"SELECT {_EXACT_COLUMNS} FROM points WHERE id IN (SELECT value FROM json_each(?))",
        ("[" + ",".join(map(str, tree_ids)) + "]",),
    ).fetchall())


def reindex_changed_points(conn: apsw.Connection) -> None:
    """Migration 21: the points of memories indexed by the rules before it, as ``extract_points``
    finds them now: every point, not the first 64; none under a key holding a dot; those inside an
    ``{x, y}`` object. Only a memory with a point indexed can have changed (each old rule indexed
    one of its points), and only one with 64 points indexed, or a container under a key holding a
    dot or inside an object with numeric ``x`` and ``y``: SQLite's JSON functions find those
    (0.2-0.4 s at 100,000 memories that all hold a point). Their points are rewritten only where they
    differ from those indexed. Safe to run again."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'points'").fetchone() is None:
        return  # no point was ever indexed
    suspects = [(cast(int, memory_id), cast(str, text)) for memory_id, text in conn.execute(_MAY_HAVE_CHANGED,
                                                                                         (_MAX_POINTS,) * 3)]
    for memory_id, text in suspects:
        context = load_stored_json(text)
        low, high = _overflow_range(memory_id)
        first = memory_id * _MAX_POINTS
        indexed = cast(list[tuple[str, float, float, float]], conn.execute(
            "SELECT field, px, py, pz FROM points WHERE id BETWEEN ? AND ? OR id BETWEEN ? AND ?",
            (first, first + _MAX_POINTS - 1, low, high)).fetchall())
        if sorted((f, (x, y, z)) for f, x, y, z in indexed) != sorted(extract_points(context)):
            index_points(conn, memory_id, context)


#: The memories (id, context) with a point indexed (row ``memory_id * _MAX_POINTS``) whose points
#: the rules before migration 21 may have indexed otherwise: a 64th point indexed; an object or
#: array under a key holding a dot, or inside an object with numeric x and y (``t.path`` is its
#: parent's path).
_MAY_HAVE_CHANGED = """
SELECT m.id, json(m.context) FROM points p CROSS JOIN memories m ON m.id = p.id / ?
WHERE p.id >= 0 AND p.id % ? = 0 AND (
    EXISTS (SELECT 1 FROM points f WHERE f.id = p.id + ? - 1)
    OR EXISTS (SELECT 1 FROM json_tree(m.context) t WHERE t.type IN ('object', 'array') AND (
        instr(t.key, '.') OR (t.path <> '$' AND json_type(m.context, t.path || '.x') IN ('integer', 'real')
                              AND json_type(m.context, t.path || '.y') IN ('integer', 'real')))))"""


def reindex_all_points(conn: apsw.Connection) -> None:
    """Migration 3's backfill, into its one tree (migration 15 splits it by epoch), for stores
    created before the spatial index existed."""
    rows = conn.execute("SELECT id, json(context) FROM memories")  # one row at a time: a store can be large
    conn.executemany(f"INSERT INTO spatial_points ({_COLUMNS}) VALUES ({', '.join('?' * 12)})", _point_rows(
        (cast(int, memory_id), load_stored_json(cast(str, context))) for memory_id, context in rows))
