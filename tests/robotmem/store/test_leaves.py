"""The leaf index's epoch key (store/leaves.py, migration 14): the same leaves as before, read by seeks."""

from __future__ import annotations

import json
from pathlib import Path

import apsw

from robotmem.search.filters import compile_filter
from robotmem.store.leaves import EPOCH_BITS, epoch_list
from robotmem.store.migrations import MIGRATIONS, migrate

EPOCH = 1 << EPOCH_BITS


def _store_at(path: Path, version: int) -> apsw.Connection:
    conn = apsw.Connection(str(path))
    migrate(conn, to=version)
    return conn


def _insert(conn: apsw.Connection, memory_id: int, context: dict[str, object]) -> None:
    conn.execute(
        "INSERT INTO memories (id, collection, type, content, search_text, context, content_hash, confidence, "
        "reinforced_at, first_seen, last_seen, created_at, occurred_at, updated_at) "
        "VALUES (?, 'default', 'perception', 'x', 'x', jsonb(?), 'h', 1, 0, 0, 0, 0, 0, 0)",
        (memory_id, json.dumps(context)))


def _leaves(conn: apsw.Connection) -> list[tuple[object, ...]]:
    return sorted(conn.execute("SELECT collection, path, value, kind, memory_id FROM context_leaves").fetchall())


def test_migration_14_keeps_every_leaf_and_the_triggers_keep_them_after_it(tmp_path: Path) -> None:
    conn = _store_at(tmp_path / "old.db", 13)
    ids = [1, 2, EPOCH - 1, EPOCH, 3 * EPOCH + 5]  # memories in three epochs
    for i, memory_id in enumerate(ids):
        _insert(conn, memory_id, {"task": {"batch": i % 2, "name": f"n{i}"}, "ok": i == 3, "pos": [i, 0]})
    before = _leaves(conn)
    migrate(conn)
    assert _leaves(conn) == before
    assert conn.execute("SELECT count(*) FROM context_leaves WHERE epoch <> memory_id >> ?",
                        (EPOCH_BITS,)).fetchone()[0] == 0
    # The rewritten triggers: an update replaces a memory's leaves, a delete removes them.
    conn.execute("UPDATE memories SET context = jsonb('{\"task\": {\"batch\": 9}}') WHERE id = ?", (EPOCH,))
    conn.execute("DELETE FROM memories WHERE id = ?", (3 * EPOCH + 5,))
    _insert(conn, 5 * EPOCH, {"task": {"batch": 9}})
    rows = conn.execute("SELECT memory_id, epoch FROM context_leaves WHERE path = '$.task.batch' AND value = 9 "
                        "ORDER BY memory_id").fetchall()
    assert rows == [(EPOCH, 1), (5 * EPOCH, 5)]
    assert conn.execute("SELECT count(*) FROM context_leaves WHERE memory_id = ?", (3 * EPOCH + 5,)).fetchone()[0] == 0
    conn.close()


def test_a_filter_seeks_each_epoch_instead_of_walking_the_path(tmp_path: Path) -> None:
    conn = _store_at(tmp_path / "new.db", MIGRATIONS[-1][0])
    for memory_id in (1, EPOCH + 1, 2 * EPOCH + 1):
        _insert(conn, memory_id, {"task": {"batch": 7}})
    (leaf_set,) = compile_filter({"task.batch": 7}).candidates
    q, p = leaf_set.query("default", epoch_list(conn))
    plan = " ".join(str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + q, p))
    assert "epoch=? AND value=?" in plan, plan
    assert sorted(r[0] for r in conn.execute(q, p)) == [1, EPOCH + 1, 2 * EPOCH + 1]
    conn.close()


# Written by hand from the rule in the module docstring, not read from json_tree.
_ODD_CONTEXT = {"a": {}, "b": {"c": {}, "d": 1.5}, "e": [1, {"f": 2}], "g[0]": 3, "h": {"i": []}, "j": None,
                "k": True, "l": "x", "m n": {"o": False}}
_ODD_LEAVES = [("$.\"m n\".o", 0, "false"), ("$.a", 0, "object"), ("$.b.c", 0, "object"), ("$.b.d", 1.5, "real"),
               ("$.e", 0, "array"), ("$.h.i", 0, "array"), ("$.j", 0, "null"), ("$.k", 1, "true"), ("$.l", "x", "text")]


def test_the_leaves_are_scalars_arrays_and_empty_objects_whichever_way_a_memory_is_written(tmp_path: Path) -> None:
    """Nested non-empty objects, array elements and keys a dot path cannot address have no leaf,
    through the insert trigger (one memory) and through a bulk insert's one statement alike."""
    from robotmem.store.memories import NewMemory, insert_memories

    conn = apsw.Connection(str(tmp_path / "leaves.db"))
    migrate(conn)

    def new(i: int) -> NewMemory:
        return NewMemory(collection="default", session_id=None, type="perception", perception_type=None,
                         content=f"m{i}", search_text=f"m{i}", context=_ODD_CONTEXT, content_hash=f"h{i}",
                         protected=False, confidence=1.0, now=0.0, occurred_at=0.0)

    (single,) = insert_memories(conn, [new(0)])
    bulk = insert_memories(conn, [new(1), new(2)])
    for memory_id in (single, *bulk):
        assert conn.execute("SELECT path, value, kind FROM context_leaves WHERE memory_id = ? ORDER BY path",
                            (memory_id,)).fetchall() == _ODD_LEAVES
