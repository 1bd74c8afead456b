"""The counts kept by triggers (robotmem.store.counts) equal a fresh GROUP BY after every kind of write."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import apsw

from robotmem import Memory
from robotmem.store.counts import COUNTS_SCHEMA
from robotmem.store.migrations import MIGRATIONS, migrate

sys.path.insert(0, str(Path(__file__).parents[1] / "search"))
from given_vectors import GivenVectors


def _grouped(conn: apsw.Connection) -> tuple[dict[Any, int], dict[Any, int]]:
    memories = {(c, t, s): n for c, t, s, n in conn.execute(
        "SELECT collection, type, status, count(*) FROM memories GROUP BY 1, 2, 3")}
    vectors = {(c, m): n for c, m, n in conn.execute(
        "SELECT collection, model_id, count(*) FROM embeddings GROUP BY 1, 2")}
    return memories, vectors


def _kept(conn: apsw.Connection) -> tuple[dict[Any, int], dict[Any, int]]:
    memories = {(c, t, s): n for c, t, s, n in conn.execute("SELECT * FROM memory_counts") if n}
    vectors = {(c, m): n for c, m, n in conn.execute("SELECT * FROM embedding_counts") if n}
    return memories, vectors


def test_counts_follow_inserts_forgets_updates_moves_and_deletes(tmp_path: Path) -> None:
    path = tmp_path / "counts.db"
    with Memory(path, embedder=GivenVectors()) as mem:
        ids = mem.save_perceptions([{"description": f"c1 grasp {i}", "metadata": {"k": i}} for i in range(30)])
        facts = [mem.learn(f"c2 the cube slips when wet {i}")["memory_id"] for i in range(5)]
        other = Memory(path, embedder=GivenVectors(), collection="lab-b")
        other.learn("c3 another lab's fact")
        other.close()
        mem.forget(ids[0], "wrong")
        mem.forget(facts[0], "outdated")
        mem.update(facts[1], "c2 the cube slips when wet and cold")
        stats = mem.stats()
    conn = apsw.Connection(str(path))
    assert _kept(conn) == _grouped(conn)
    grouped = _grouped(conn)[0]
    for collection, entry in stats["collections"].items():
        assert entry["by_status"] == _summed(grouped, collection)
    assert stats["memories"] == sum(n for (_, _, s), n in grouped.items() if s in ("active", "archived"))
    assert stats["embeddings"] == {"test-given/32": sum(_grouped(conn)[1].values())}
    # Raw SQL repairs are counted too: a move between collections, a model change, a delete.
    conn.execute("UPDATE memories SET collection = 'lab-c', status = 'archived' WHERE id = ?", (ids[1],))
    conn.execute("UPDATE embeddings SET model_id = 'other/32', collection = 'lab-c' WHERE memory_id = ?", (ids[1],))
    conn.execute("DELETE FROM embeddings WHERE memory_id = ?", (ids[2],))
    conn.execute("DELETE FROM memories WHERE id = ?", (ids[3],))
    conn.execute("INSERT INTO embeddings (memory_id, collection, model_id, dim, vector) VALUES (?, 'default', "
                 "'test-given/32', 32, zeroblob(128)) ON CONFLICT (memory_id) DO UPDATE SET model_id = 'third/32'",
                 (ids[4],))
    assert _kept(conn) == _grouped(conn)
    conn.close()


def _summed(grouped: dict[Any, int], collection: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for (c, _, status), n in grouped.items():
        if c == collection:
            out[status] = out.get(status, 0) + n
    return out


def test_the_migration_counts_existing_memories(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with Memory(path, embedder=GivenVectors()) as mem:
        mem.save_perceptions([{"description": f"c1 old episode {i}", "metadata": {}} for i in range(12)])
        mem.forget(1, "bad")
    conn = apsw.Connection(str(path))
    conn.execute("DROP TABLE memory_counts; DROP TABLE embedding_counts; DROP TRIGGER memories_ai_counts; "
                 "DROP TRIGGER memories_ad_counts; DROP TRIGGER memories_au_counts; DROP TRIGGER embeddings_ai_counts; "
                 "DROP TRIGGER embeddings_ad_counts; DROP TRIGGER embeddings_au_counts")
    counts_version = next(version for version, step in MIGRATIONS if step == COUNTS_SCHEMA)
    conn.execute(f"PRAGMA user_version={counts_version - 1}")
    migrate(conn)
    assert _kept(conn) == _grouped(conn) == (
        {("default", "perception", "active"): 11, ("default", "perception", "forgotten"): 1},
        {("default", "test-given/32"): 12})
    conn.close()


def _new(collection: str, kind: str, i: int) -> Any:
    from robotmem.store.memories import NewMemory

    return NewMemory(collection=collection, session_id=None, type=kind, perception_type=None, content=f"m{i}",
                     search_text=f"m{i}", context={"i": i}, content_hash=f"h{i}", protected=False, confidence=1.0,
                     now=0.0, occurred_at=0.0)


def _logged(conn: apsw.Connection, ids: list[int]) -> list[tuple[int, str]]:
    """change_log rows of ``ids`` as (position in ids, collection), in log order."""
    position = {memory_id: i for i, memory_id in enumerate(ids)}
    return [(position[m], c) for m, c in conn.execute("SELECT memory_id, collection FROM change_log ORDER BY seq")
            if m in position]


def test_a_bulk_insert_counts_and_logs_what_the_per_row_triggers_do(tmp_path: Path) -> None:
    """Bulk inserts count and log in one statement each (store.deferred): the same counts and log
    rows as row by row, with vectors new, already there and repeated within one call."""
    import numpy as np

    from robotmem.store.memories import insert_memories, insert_memory, put_embedding, put_embeddings

    conn = apsw.Connection(str(tmp_path / "bulk.db"))
    migrate(conn)
    items = [_new(("lab-a", "lab-b")[i % 2], ("perception", "fact")[i % 3 == 0], i) for i in range(9)]
    bulk = insert_memories(conn, items)
    one_by_one = [insert_memory(conn, m) for m in items]
    assert _kept(conn) == _grouped(conn)
    vectors = np.random.default_rng(0).standard_normal((9, 4)).astype(np.float32)
    for ids in (bulk, one_by_one):
        put_embedding(conn, ids[2], "lab-a", "old/4", vectors[8])  # a vector already there
    # Row 5 twice: the later one wins, as upserting row by row would leave it.
    rows = [(i, ("lab-a", "lab-b")[i % 2], ("m/4", "n/4")[i > 6], vectors[i]) for i in (0, 1, 2, 5, 3, 5, 7, 8)]
    conn.execute("DELETE FROM change_log")
    put_embeddings(conn, [(bulk[i], c, m, v) for i, c, m, v in rows])
    for i, c, m, v in rows:
        put_embedding(conn, one_by_one[i], c, m, v)
    assert _kept(conn) == _grouped(conn)
    stored = {memory_id: (c, m, d, bytes(v)) for memory_id, c, m, d, v in conn.execute(
        "SELECT memory_id, collection, model_id, dim, vector FROM embeddings")}
    assert [stored.get(i) for i in bulk] == [stored.get(i) for i in one_by_one]
    assert sorted(_logged(conn, bulk)) == sorted(_logged(conn, one_by_one))
    assert conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, -1) == 1  # the bulk writer turned them on again
    # Outside a bulk insert the triggers count and log as before.
    conn.execute("INSERT INTO embeddings (memory_id, collection, model_id, dim, vector) VALUES (?, 'lab-a', 'm/4', 4, "
                 "zeroblob(16))", (bulk[4],))
    assert _kept(conn) == _grouped(conn) and _logged(conn, [bulk[4]]) == [(0, "lab-a")]


def test_a_bulk_insert_runs_no_trigger_program_per_row(tmp_path: Path) -> None:
    """The per-row triggers' work is done once per batch: a trigger program per row cost a sixth
    of a 1,000-vector insert even when its WHEN clause stopped it. A trigger of our own shows
    which rows ran one (in the main schema: SQLite still runs TEMP triggers with triggers off)."""
    import numpy as np

    from robotmem.store.memories import insert_memories, insert_memory, put_embeddings

    conn = apsw.Connection(str(tmp_path / "bulk.db"))
    migrate(conn)
    conn.execute("CREATE TABLE fired (tbl TEXT, id INTEGER)")
    conn.execute("CREATE TRIGGER m_fired AFTER INSERT ON memories BEGIN "
                 "INSERT INTO fired VALUES ('memories', new.id); END")
    conn.execute("CREATE TRIGGER e_fired AFTER INSERT ON embeddings BEGIN "
                 "INSERT INTO fired VALUES ('embeddings', new.memory_id); END")
    bulk = insert_memories(conn, [_new("lab-a", "perception", i) for i in range(3)])
    vectors = np.ones((3, 4), dtype=np.float32)
    put_embeddings(conn, [(memory_id, "lab-a", "m/4", vectors[i]) for i, memory_id in enumerate(bulk)])
    single = insert_memory(conn, _new("lab-a", "perception", 9))
    put_embeddings(conn, [(single, "lab-a", "m/4", vectors[0])])
    assert conn.execute("SELECT tbl, id FROM fired ORDER BY tbl").fetchall() == [("embeddings", single),
                                                                                  ("memories", single)]
    assert _kept(conn) == _grouped(conn)  # and the batch was counted all the same


def test_migration_17_leaves_no_trigger_looking_for_the_old_marker_row(tmp_path: Path) -> None:
    """The marker table the bulk writer once wrote is gone, and the five insert triggers that looked
    for it are there without the look (the single-row paths above show they still do their work)."""
    conn = apsw.Connection(str(tmp_path / "v17.db"))
    migrate(conn)
    assert conn.execute("SELECT name FROM sqlite_master WHERE sql LIKE '%leaves_deferred%' "
                        "OR name = 'leaves_deferred'").fetchall() == []
    triggers = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    assert {"memories_ai", "memories_ai_leaves", "memories_ai_counts", "embeddings_ai_counts",
            "embeddings_ai_log"} <= triggers


def _payloads_grouped(conn: apsw.Connection) -> dict[str, tuple[int, int]]:
    return {c: (n, b) for c, n, b in conn.execute(
        "SELECT m.collection, count(*), sum(length(p.data)) FROM payloads p JOIN memories m ON m.id = p.memory_id "
        "GROUP BY 1")}


def _payloads_kept(conn: apsw.Connection) -> dict[str, tuple[int, int]]:
    return {c: (n, b) for c, n, b in conn.execute("SELECT * FROM payload_counts") if n or b}


def test_payload_counts_follow_every_write_and_answer_stats(tmp_path: Path) -> None:
    from robotmem.store.memories import insert_payload

    path = tmp_path / "payloads.db"
    with Memory(path, embedder=None) as mem:
        ids = mem.save_perceptions([{"description": f"joint torques {i}", "data": {"tau": [0.5] * (i + 1)}}
                                    for i in range(6)] + [{"description": "no payload"}])
        mem.save_perception("camera frame", data={"pixels": list(range(40))}, collection="lab-b")
        mem.forget(ids[0], "bad sensor")  # a forgotten memory keeps its payload, counted as before
        stats = mem.stats()
        lab_b = mem.stats(collection="lab-b")
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA foreign_keys=ON")
    grouped = _payloads_grouped(conn)
    assert _payloads_kept(conn) == grouped and set(grouped) == {"default", "lab-b"}
    assert stats["payload_bytes"] == sum(b for _, b in grouped.values())
    assert lab_b["payload_bytes"] == grouped["lab-b"][1]
    # Every other way a payload changes, raw SQL included.
    insert_payload(conn, ids[1], b"\x91\x01" * 50, {})  # saved again for the same memory: replaced, not added
    conn.execute("UPDATE payloads SET data = x'c0' WHERE memory_id = ?", (ids[2],))
    conn.execute("UPDATE memories SET collection = 'lab-c' WHERE id = ?", (ids[3],))
    conn.execute("UPDATE memories SET collection = 'lab-c' WHERE id = ?", (ids[6],))  # no payload to move
    conn.execute("DELETE FROM payloads WHERE memory_id = ?", (ids[4],))
    assert _payloads_kept(conn) == _payloads_grouped(conn)
    # With foreign keys off a memory can go before its payload; the orphan is no one's any more.
    conn.execute("PRAGMA foreign_keys=OFF")
    conn.execute("DELETE FROM memories WHERE id = ?", (ids[5],))
    assert _payloads_kept(conn) == _payloads_grouped(conn)
    conn.execute("DELETE FROM payloads WHERE memory_id = ?", (ids[5],))

    def size(memory_id: int) -> int:
        return int(conn.execute("SELECT length(data) FROM payloads WHERE memory_id = ?", (memory_id,)).fetchone()[0])

    assert _payloads_kept(conn) == _payloads_grouped(conn) == {
        "default": (3, size(ids[0]) + 100 + 1), "lab-b": grouped["lab-b"], "lab-c": (1, size(ids[3]))}
    conn.close()


def test_migration_18_counts_existing_payloads(tmp_path: Path) -> None:
    path = tmp_path / "v17.db"
    with Memory(path, embedder=None) as mem:
        mem.save_perceptions([{"description": f"wrench reading {i}", "data": {"f": [1.5] * (i + 2)},
                               "collection": ("lab-a", "lab-b")[i % 2]} for i in range(5)])
    conn = apsw.Connection(str(path))
    conn.execute("DROP TABLE payload_counts; DROP TRIGGER payloads_ai_counts; DROP TRIGGER payloads_ad_counts; "
                 "DROP TRIGGER payloads_au_counts; DROP TRIGGER memories_au_payload_counts; "
                 "DROP TRIGGER memories_ad_payload_counts; PRAGMA user_version=17")
    migrate(conn)
    assert _payloads_kept(conn) == _payloads_grouped(conn)
    assert {c: n for c, (n, _) in _payloads_kept(conn).items()} == {"lab-a": 3, "lab-b": 2}
    conn.close()
