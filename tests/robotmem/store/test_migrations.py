import logging
import threading
import time
from pathlib import Path

import apsw
import pytest

from robotmem import Config, Memory, StorageError
from robotmem.store.migrations import SCHEMA_VERSION
from robotmem.store.rows import DUPLICATE_FACT_SQL


def _user_version(path: Path) -> int:
    conn = apsw.Connection(str(path))
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def test_a_new_store_is_migrated_to_the_latest_schema_version(db_path: Path):
    Memory(db_path, embedder=None).close()
    assert _user_version(db_path) == SCHEMA_VERSION


def test_reopening_a_store_keeps_its_data_and_version(db_path: Path):
    with Memory(db_path, embedder=None) as mem:
        mid = mem.learn("joint 3 overheats above 60 C")["memory_id"]
    with Memory(db_path, embedder=None) as mem:
        assert mem.get(mid)["content"] == "joint 3 overheats above 60 C"
    assert _user_version(db_path) == SCHEMA_VERSION


def test_a_store_from_a_newer_robotmem_is_refused(db_path: Path):
    Memory(db_path, embedder=None).close()
    conn = apsw.Connection(str(db_path))
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StorageError, match="newer"):
        Memory(db_path, embedder=None)


def test_the_store_runs_in_wal_mode(db_path: Path):
    Memory(db_path, embedder=None).close()
    conn = apsw.Connection(str(db_path))
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_archiving_and_reviving_keeps_the_memory_searchable(mem):
    mid = mem.learn("the lidar lens was dusty")["memory_id"]
    conn = mem._db.connection()
    conn.execute("UPDATE memories SET status = 'archived' WHERE id = ?", (mid,))
    assert [h["id"] for h in mem.recall("lidar", min_confidence=0)["results"]] == [mid]
    conn.execute("UPDATE memories SET status = 'active' WHERE id = ?", (mid,))
    assert [h["id"] for h in mem.recall("lidar")["results"]] == [mid]
    conn.execute("UPDATE memories SET status = 'superseded' WHERE id = ?", (mid,))
    assert mem.recall("lidar", min_confidence=0)["results"] == []


def test_migration_8_indexes_context_identifiers_of_existing_memories(db_path: Path):
    with Memory(db_path, embedder=None) as mem:
        mid = mem.learn("the gimbal jittered at 120 Hz", context={"hardware": {"part": "G3-GIMBAL-220"}})["memory_id"]
    conn = apsw.Connection(str(db_path))
    # As robotmem before migration 8 wrote it: the content's tokens only.
    conn.execute("UPDATE memories SET search_text = 'the gimbal jittered at 120 hz' WHERE id = ?", (mid,))
    conn.execute("PRAGMA user_version=7")
    conn.close()
    with Memory(db_path, embedder=None) as mem:
        assert [h["id"] for h in mem.recall("G3-GIMBAL-220")["results"]] == [mid]
    assert _user_version(db_path) == SCHEMA_VERSION


def test_migration_13_indexes_the_content_hash_of_facts_only(db_path: Path):
    with Memory(db_path, embedder=None) as mem:
        fact = mem.learn("the dock light flickers at dusk")["memory_id"]
        mem.save_perceptions([{"description": f"dock frame {i}"} for i in range(3)])
    conn = apsw.Connection(str(db_path))
    # As robotmem before migration 13 left it: every memory's hash indexed.
    conn.execute("DROP INDEX memories_fact_by_hash; CREATE INDEX memories_by_hash ON memories(collection, content_hash);"
                 "PRAGMA user_version=12")
    conn.close()
    with Memory(db_path, embedder=None) as mem:
        assert mem.learn("the dock light flickers at dusk") == {"memory_id": fact, "status": "duplicate"}
        conn = mem._db.connection()
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "memories_by_hash" not in names and "memories_fact_by_hash" in names
        plan = " ".join(str(row[3]) for row in conn.execute(
            "EXPLAIN QUERY PLAN " + DUPLICATE_FACT_SQL, ("default", "x")))
        assert "memories_fact_by_hash" in plan
        indexed = conn.execute("SELECT count(*) FROM memories INDEXED BY memories_fact_by_hash "
                               "WHERE type = 'fact' AND content_hash IS NOT NULL").fetchone()[0]
        assert indexed == 1
    assert _user_version(db_path) == SCHEMA_VERSION


def _hold_write_lock(path: Path, seconds: float, *, version: int | None = None) -> threading.Thread:
    """Another process's long write (a migration when ``version`` is given: it sets that version
    before it commits). Returns the thread that commits after ``seconds``."""
    holder = apsw.Connection(str(path))
    holder.execute("BEGIN IMMEDIATE")

    def finish() -> None:
        time.sleep(seconds)
        if version is not None:
            holder.execute(f"PRAGMA user_version={version}")
        holder.execute("COMMIT")
        holder.close()

    thread = threading.Thread(target=finish)
    thread.start()
    return thread


def test_an_up_to_date_store_opens_while_another_process_holds_the_write_lock(db_path: Path):
    Memory(db_path, embedder=None).close()
    holder = _hold_write_lock(db_path, 1.5)
    try:
        # A busy timeout far below the other write: opening must not wait for the lock at all.
        with Memory(db_path, embedder=None, config=Config.load(busy_timeout_ms=100)) as mem:
            assert mem.stats()["memories"] == 0
    finally:
        holder.join()


def test_opening_waits_for_another_process_migrating_the_store(db_path: Path, caplog: pytest.LogCaptureFixture):
    """Migration 16 rewrote a store of a million memories in 9.3 s, close to the busy timeout; a
    process opened beside the one migrating must wait for it, not fail."""
    Memory(db_path, embedder=None).close()
    conn = apsw.Connection(str(db_path))
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION - 1}")
    conn.close()
    holder = _hold_write_lock(db_path, 1.0, version=SCHEMA_VERSION)
    try:
        with caplog.at_level(logging.WARNING, logger="robotmem.store.sqlite"):
            with Memory(db_path, embedder=None, config=Config.load(busy_timeout_ms=100)) as mem:
                assert mem.learn("joint 3 overheats above 60 C")["status"] == "created"
    finally:
        holder.join()
    assert _user_version(db_path) == SCHEMA_VERSION
    assert sum("another process holds the write lock" in r.message for r in caplog.records) == 1


def test_migration_19_gives_existing_memories_a_provisional_uid_each(db_path: Path, tmp_path: Path):
    with Memory(db_path, embedder=None) as mem:
        mem.learn("the dock light flickers at dusk")
        mem.save_perceptions([{"description": "dock frame with one text"}] * 3)
    conn = apsw.Connection(str(db_path))
    # As robotmem before migration 19 left it.
    conn.execute("DROP INDEX memories_by_uid; DROP TABLE import_links; ALTER TABLE memories DROP COLUMN uid;"
                 "PRAGMA user_version=18")
    conn.close()
    with Memory(db_path, embedder=None) as mem:
        mem.export(tmp_path / "e.jsonl")
        assert mem.import_(tmp_path / "e.jsonl")["memories"] == 0
        uids = [u for (u,) in mem._db.connection().execute("SELECT uid FROM memories ORDER BY id")]
    assert len(uids) == 4 == len(set(uids)) and all(len(u) == 32 and int(u, 16) >= 0 for u in uids)
    # Provisional (a time of 0 ms): a later import takes them for the records they are by the old rule.
    assert all(u.startswith("000000000000") and u == u.lower() for u in uids)
    assert _user_version(db_path) == SCHEMA_VERSION
    # Safe to run again: the uids it gave are kept.
    conn = apsw.Connection(str(db_path))
    conn.execute("PRAGMA user_version=18")
    conn.close()
    with Memory(db_path, embedder=None) as mem:
        again = [u for (u,) in mem._db.connection().execute("SELECT uid FROM memories ORDER BY id")]
        new = mem.save_perception("dock frame after the upgrade", "visual")["memory_id"]
        assert not mem._db.connection().execute("SELECT uid FROM memories WHERE id = ?", (new,)).fetchone()[0] \
            .startswith("000000000000")
    assert again == uids and _user_version(db_path) == SCHEMA_VERSION
