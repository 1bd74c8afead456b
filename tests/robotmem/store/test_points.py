"""The spatial index's epoch R*Trees (store/points.py, migrations 15 and 16): one small tree of
boxes per epoch of memory ids, the exact columns in ``points``, read through ``spatial_points``."""

from __future__ import annotations

import math
import random
from pathlib import Path

import apsw

from robotmem import Memory
from robotmem.store.migrations import migrate
from robotmem.store.points import EPOCH_BITS, memory_of_point

EPOCH = 1 << EPOCH_BITS
BOX = ("SELECT r.memory_id, r.px, r.py, r.pz FROM spatial_points r WHERE r.field = ? "
       "AND r.maxx >= ? AND r.minx <= ? AND r.maxy >= ? AND r.miny <= ?")


def _trees(conn: apsw.Connection) -> list[str]:
    return sorted(str(n) for (n,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%rtree%'"))


def _jump_ids(path: Path, to: int) -> None:
    """The next memory gets id ``to + 1``: memories in a later epoch without writing a whole epoch first."""
    conn = apsw.Connection(str(path))
    conn.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'memories'", (to,))
    conn.close()


def test_nearest_first_across_epoch_trees_matches_brute_force(tmp_path: Path) -> None:
    path = tmp_path / "epochs.db"
    rng = random.Random(3)
    points: dict[int, list[float]] = {}
    with Memory(path, embedder=None) as mem:
        for start in (0, 2 * EPOCH - 50, 5 * EPOCH):  # epochs 0, 1 and 2, and 5
            if start:
                _jump_ids(path, start)
            records = [{"description": f"point {i}", "metadata": {"spatial": {"p": [rng.uniform(-9, 9), rng.uniform(-9, 9)]}}}
                       for i in range(120)]
            for memory_id, record in zip(mem.save_perceptions(records), records):
                points[memory_id] = record["metadata"]["spatial"]["p"]
        assert {m >> EPOCH_BITS for m in points} == {0, 1, 2, 5}
        target = [1.0, -2.0]
        expected = sorted(points, key=lambda m: (math.dist(points[m], target), -m))[:15]
        found = mem.recall("", n=15, spatial_sort={"field": "spatial.p", "target": target})["results"]
        assert [h["id"] for h in found] == expected
        # An update in a later epoch moves the memory: its old point is gone from that epoch's tree.
        moved = max(points)
        mem.update(moved, "point moved", {"spatial": {"p": [50.0, 50.0]}})
        nearest = mem.recall("", n=1, spatial_sort={"field": "spatial.p", "target": [50, 50]})["results"]
        assert nearest[0]["id"] == moved and nearest[0]["distance"] == 0
    conn = apsw.Connection(str(path))
    assert _trees(conn) == [f"spatial_points_e{e}" for e in (0, 1, 2, 5)]
    assert conn.execute("SELECT count(*) FROM spatial_points WHERE memory_id = ?", (moved,)).fetchone()[0] == 1
    # SQLite pushes the box down into every tree: each is read by its R*Tree index, none scanned.
    plan = [str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + BOX, ("spatial.p", 0, 1, 0, 1))]
    assert sum("VIRTUAL TABLE INDEX 2:" in step for step in plan) == 4, plan
    conn.close()


def test_migration_15_moves_every_point_into_its_epoch_tree(tmp_path: Path) -> None:
    conn = apsw.Connection(str(tmp_path / "old.db"))
    _migrated_to(conn, 14)
    rows = [(m * 64 + k, float(m % 7), float(m % 7), float(k), float(k), 0.0, 0.0, m, "p", float(m % 7), float(k), 0.0)
            for m in (1, 2, EPOCH - 1, EPOCH, 3 * EPOCH + 9) for k in range(2)]
    conn.executemany("INSERT INTO spatial_points VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    migrate(conn)
    assert _trees(conn) == [f"spatial_points_e{e}" for e in (0, 1, 3)]
    # R*Tree boxes are 32-bit floats: the small integers used here survive exactly.
    assert sorted(tuple(r) for r in conn.execute("SELECT * FROM spatial_points")) == sorted(rows)
    for epoch in (0, 1, 3):
        ids = {i for (i,) in conn.execute(f"SELECT id FROM spatial_points_e{epoch}")}
        assert {memory_of_point(i) >> EPOCH_BITS for i in ids} == {epoch}
    conn.close()


def _migrated_to(conn: apsw.Connection, version: int) -> None:
    migrate(conn, to=version)


# Migration 15 as shipped: each epoch tree with the point's memory, field and exact coordinates
# as auxiliary columns, under one view.
_SHIPPED_TREE = ("CREATE VIRTUAL TABLE spatial_points_e{} USING rtree(id, minx, maxx, miny, maxy, minz, maxz, "
                 "+memory_id INTEGER, +field TEXT, +px REAL, +py REAL, +pz REAL)")


def test_migration_16_moves_the_exact_columns_out_of_every_tree_and_keeps_every_point(tmp_path: Path) -> None:
    conn = apsw.Connection(str(tmp_path / "v15.db"))
    _migrated_to(conn, 14)
    conn.execute("DROP TABLE spatial_points")
    rng = random.Random(5)
    rows = [(m * 64 + k, x, x, y, y, 0.0, 0.0, m, f"spatial.p{k}", x, y, 0.0)
            for m in (1, 2, EPOCH - 1, EPOCH, 3 * EPOCH + 9) for k in range(3)
            for x, y in [(rng.uniform(-9, 9), rng.uniform(-9, 9))]]
    for epoch in (0, 1, 3):
        conn.execute(_SHIPPED_TREE.format(epoch))
        conn.executemany(f"INSERT INTO spatial_points_e{epoch} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         [r for r in rows if r[7] >> EPOCH_BITS == epoch])
    conn.execute("CREATE VIEW spatial_points AS " + " UNION ALL ".join(
        f"SELECT * FROM spatial_points_e{e}" for e in (0, 1, 3)))
    conn.execute("PRAGMA user_version=15")
    migrate(conn)
    assert _trees(conn) == [f"spatial_points_e{e}" for e in (0, 1, 3)]
    for epoch in (0, 1, 3):
        assert "+memory_id" not in conn.execute("SELECT sql FROM sqlite_master WHERE name = ?",
                                                (f"spatial_points_e{epoch}",)).fetchone()[0]
        assert conn.execute(f"SELECT rtreecheck('spatial_points_e{epoch}')").fetchone()[0] == "ok"
    assert not conn.execute("SELECT name FROM sqlite_master WHERE name GLOB 'spatial_points_aux*'").fetchall()
    # The exact coordinates keep every bit; the tree's 32-bit boxes still hold them.
    assert sorted(tuple(r[7:]) for r in conn.execute("SELECT * FROM spatial_points")) == sorted(r[7:] for r in rows)
    for point_id, minx, maxx, miny, maxy, *_ in conn.execute("SELECT * FROM spatial_boxes"):
        _, _, _, _, _, _, _, _, _, x, y, _ = next(r for r in rows if r[0] == point_id)
        assert minx <= x <= maxx and miny <= y <= maxy
    migrate(conn)  # nothing left to move
    conn.close()


def test_a_store_at_migration_15_answers_spatial_recall_as_before(tmp_path: Path) -> None:
    """End to end: points written through the API before migration 16 are found nearest first
    after it, and an update replaces the moved memory's row in ``points`` too."""
    path = tmp_path / "store.db"
    rng = random.Random(8)
    points: dict[int, list[float]] = {}
    with Memory(path, embedder=None) as mem:
        records = [{"description": f"point {i}",
                    "metadata": {"spatial": {"p": [rng.uniform(-9, 9), rng.uniform(-9, 9)]}}} for i in range(200)]
        for memory_id, record in zip(mem.save_perceptions(records), records):
            points[memory_id] = record["metadata"]["spatial"]["p"]
    conn = apsw.Connection(str(path))
    # Back to migration 15's shape: the rows go back into a tree with auxiliary columns.
    old = conn.execute("SELECT * FROM spatial_points").fetchall()
    conn.execute("DROP VIEW spatial_points")
    conn.execute("DROP VIEW spatial_boxes")
    conn.execute("DROP TABLE spatial_points_e0")
    conn.execute("DROP TABLE points")
    conn.execute(_SHIPPED_TREE.format(0))
    conn.executemany("INSERT INTO spatial_points_e0 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", old)
    conn.execute("CREATE VIEW spatial_points AS SELECT * FROM spatial_points_e0")
    conn.execute("PRAGMA user_version=15")
    conn.close()
    with Memory(path, embedder=None) as mem:
        target = [2.0, 3.0]
        expected = sorted(points, key=lambda m: (math.dist(points[m], target), -m))[:20]
        found = mem.recall("", n=20, spatial_sort={"field": "spatial.p", "target": target})["results"]
        assert [h["id"] for h in found] == expected
        moved = expected[0]
        mem.update(moved, "moved far", {"spatial": {"p": [80.0, 80.0]}})
        found = mem.recall("", n=20, spatial_sort={"field": "spatial.p", "target": target})["results"]
        assert moved not in [h["id"] for h in found]
    conn = apsw.Connection(str(path))
    assert conn.execute("SELECT px, py FROM points WHERE memory_id = ?", (moved,)).fetchall() == [(80.0, 80.0)]
    conn.close()

