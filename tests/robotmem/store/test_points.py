"""The spatial index's epoch R*Trees (store/points.py, migration 15): one small tree per epoch of
memory ids, read through the view ``spatial_points``."""

from __future__ import annotations

import math
import random
from pathlib import Path

import apsw

from robotmem import Memory
from robotmem.store.migrations import MIGRATIONS, migrate
from robotmem.store.points import EPOCH_BITS

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
    for number, step in MIGRATIONS:
        if number > 14:
            break
        step(conn) if callable(step) else conn.execute(step)
        conn.execute(f"PRAGMA user_version={number}")
    rows = [(m * 64 + k, float(m % 7), float(m % 7), float(k), float(k), 0.0, 0.0, m, "p", float(m % 7), float(k), 0.0)
            for m in (1, 2, EPOCH - 1, EPOCH, 3 * EPOCH + 9) for k in range(2)]
    conn.executemany("INSERT INTO spatial_points VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    migrate(conn)
    assert _trees(conn) == [f"spatial_points_e{e}" for e in (0, 1, 3)]
    # R*Tree boxes are 32-bit floats: the small integers used here survive exactly.
    assert sorted(tuple(r) for r in conn.execute("SELECT * FROM spatial_points")) == sorted(rows)
    for epoch in (0, 1, 3):
        ids = {m for (m,) in conn.execute(f"SELECT memory_id FROM spatial_points_e{epoch}")}
        assert {m >> EPOCH_BITS for m in ids} == {epoch}
    conn.close()

