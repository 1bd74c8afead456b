"""change_log is pruned (robotmem.store.change_log, robotmem.search.log_pruning) and no reader
misses a change for it: mirrors and cached columns that fell behind the pruned floor load afresh,
a snapshot the pruning outran is given up for the exact scan. Real SQLite files, two Memory
instances on one file (each keeps its own last-seen sequence number), answers checked against
numpy over the embeddings table and plain SQL."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import apsw
import numpy as np
import pytest
from given_vectors import DIM, GivenVectors, vector_of

from robotmem import Memory
from robotmem.cli.commands import render_stats
from robotmem.search import ann_index, log_pruning
from robotmem.search.log_pruning import prune_change_log
from robotmem.store import change_log, connection


@pytest.fixture
def small_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep 20 rows, prune 7 a transaction: a few hundred writes cross the floor many times."""
    monkeypatch.setattr(change_log, "KEEP_ROWS", 20)
    monkeypatch.setattr(change_log, "PAGE_ROWS", 7)


def _fill(mem: Memory, count: int, start: int = 0) -> list[int]:
    return mem.save_perceptions([{"description": f"c{i % 40} grasp note {i}"} for i in range(start, start + count)])


def _oracle(mem: Memory, q: np.ndarray, k: int) -> list[int]:
    """The exact top k of the active rows, numpy over the embeddings table (min_relevance 0 keeps all)."""
    rows = mem._db.connection().execute(
        "SELECT e.memory_id, e.vector FROM embeddings e JOIN memories m ON m.id = e.memory_id "
        "WHERE m.status = 'active' AND m.collection = 'default'").fetchall()
    ids = np.array([r[0] for r in rows])
    scores = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(-1, DIM) @ q
    return [int(ids[i]) for i in np.argsort(-scores, kind="stable")[:k]]


def _recalled(mem: Memory, q: np.ndarray, k: int = 10) -> list[int]:
    return [h["id"] for h in mem.recall("zzqxv", n=k, query_vector=q, min_relevance=0)["results"]]


def _queries() -> list[np.ndarray]:
    return [vector_of(f"c{i} probe {i}") for i in range(0, 40, 3)]


def _log_rows(mem: Memory) -> int:
    return int(mem._db.connection().execute("SELECT count(*) FROM change_log").fetchone()[0])


def _churn(mem: Memory, ids: list[int]) -> None:
    """Changes of every kind recall must see: new rows, re-embedded ones, forgotten ones."""
    _fill(mem, 120, start=1000)
    for m in ids[:40:2]:
        mem.forget(m, "test")
    for m in ids[1:40:2]:
        mem.update(m, f"c{m % 40} moved elsewhere {m}")


def test_a_mirror_behind_the_pruned_floor_loads_afresh_and_answers_like_brute_force(tmp_path: Path, small_log):
    path = tmp_path / "memory.db"
    with Memory(path, embedder=GivenVectors()) as reader, Memory(path, embedder=GivenVectors()) as writer:
        ids = _fill(writer, 300)
        before = [_recalled(reader, q) for q in _queries()]  # the reader's mirror now stands at this seq
        assert before == [_oracle(writer, q, 10) for q in _queries()]
        _churn(writer, ids)
        pruned = prune_change_log(writer.store)
        assert pruned > 0 and _log_rows(writer) == 20
        for q in _queries():
            assert _recalled(reader, q) == _oracle(writer, q, 10)
        forgotten = set(ids[:40:2])
        assert not forgotten & {m for q in _queries() for m in _recalled(reader, q, 50)}


_WRITER = """
import sys
sys.path.insert(0, sys.argv[2])
from given_vectors import GivenVectors
from robotmem import Memory
from robotmem.cli.commands import render_stats
from robotmem.search import log_pruning
from robotmem.store import change_log, connection
change_log.KEEP_ROWS, change_log.PAGE_ROWS, log_pruning.PRUNE_EVERY = 20, 7, 50
with Memory(sys.argv[1], embedder=GivenVectors()) as mem:
    ids = mem.save_perceptions([{"description": f"c{i % 40} grasp note {i}"} for i in range(1000, 1400)])
    for m in list(range(1, 41)):
        mem.forget(m, "test")
    log_pruning.prune_change_log(mem.store)
"""


def test_a_reader_behind_another_process_that_pruned_answers_like_brute_force(tmp_path: Path):
    path = tmp_path / "memory.db"
    with Memory(path, embedder=GivenVectors()) as reader:
        ids = _fill(reader, 300)
        assert [_recalled(reader, q) for q in _queries()] == [_oracle(reader, q, 10) for q in _queries()]
        subprocess.run([sys.executable, "-c", _WRITER, str(path), str(Path(__file__).parent)], check=True,
                       env=os.environ.copy())
        assert _log_rows(reader) == 20
        for q in _queries():
            assert _recalled(reader, q) == _oracle(reader, q, 10)
        assert not set(ids[:40]) & {m for q in _queries() for m in _recalled(reader, q, 50)}


def test_a_snapshot_the_pruning_outran_is_given_up_for_the_exact_scan_and_rebuilt(
        tmp_path: Path, small_log, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "memory.db"
    # A snapshot more than 30 changes old holds no rows: the reader's overlay falls behind the floor.
    monkeypatch.setattr(log_pruning, "HOLD_MAX_ROWS", 30)
    with Memory(path, embedder=GivenVectors()) as reader, Memory(path, embedder=GivenVectors()) as writer:
        ids = _fill(writer, 600)
        assert writer.rebuild_vector_indexes(min_rows=0)
        assert [_recalled(reader, q) for q in _queries()] == [_oracle(writer, q, 10) for q in _queries()]
        vectors = reader.recall_engine._vectors
        snapshot = vectors.ann("default", GivenVectors.model_id, DIM)
        assert snapshot is not None
        _churn(writer, ids)
        assert prune_change_log(writer.store) > 0
        with writer._db.read() as conn:
            assert change_log.missed(conn, "default", snapshot.seq)
        # Stale however few changes are left after it, and said so.
        assert [(s["built"], s["stale"]) for s in writer.stats()["vector_indexes"]] == [(True, True)]
        assert ", stale" in "\n".join(render_stats(writer.stats()))
        for q in _queries():
            assert _recalled(reader, q) == _oracle(writer, q, 10)
        assert vectors.ann("default", GivenVectors.model_id, DIM) is None  # until its replacement is published
        vectors.join_builds()
        fresh = vectors.ann("default", GivenVectors.model_id, DIM)
        assert fresh is not None and fresh.seq > snapshot.seq
        for q in _queries():
            assert _recalled(reader, q) == _oracle(writer, q, 10)


def test_a_published_snapshot_holds_the_rows_its_overlay_needs(tmp_path: Path, small_log):
    path = tmp_path / "memory.db"
    with Memory(path, embedder=GivenVectors()) as reader, Memory(path, embedder=GivenVectors()) as writer:
        ids = _fill(writer, 600)
        writer.rebuild_vector_indexes(min_rows=0)
        snapshot = reader.recall_engine._vectors.ann("default", GivenVectors.model_id, DIM)
        assert snapshot is not None
        _churn(writer, ids)
        with writer._db.read() as conn:
            owed = ann_index.pending_changes(conn, "default", snapshot.seq)
        prune_change_log(writer.store)
        with writer._db.read() as conn:
            assert not change_log.missed(conn, "default", snapshot.seq)
            assert ann_index.pending_changes(conn, "default", snapshot.seq) == owed
        for q in _queries():
            assert _recalled(reader, q) == _oracle(writer, q, 10)
        assert reader.recall_engine._vectors.ann("default", GivenVectors.model_id, DIM) is snapshot


def test_recall_answers_the_same_before_and_after_a_prune(tmp_path: Path, small_log):
    path = tmp_path / "memory.db"
    with Memory(path, embedder=GivenVectors()) as mem:
        ids = _fill(mem, 300)
        _churn(mem, ids)
        before = [mem.recall(f"c{i} grasp note", n=10) for i in range(0, 40, 5)]
        assert prune_change_log(mem.store) > 0
        after = [mem.recall(f"c{i} grasp note", n=10) for i in range(0, 40, 5)]
    with Memory(path, embedder=GivenVectors()) as fresh:
        again = [fresh.recall(f"c{i} grasp note", n=10) for i in range(0, 40, 5)]
    strip = [[(h["id"], h["score"]) for h in r["results"]] for r in before]
    assert strip == [[(h["id"], h["score"]) for h in r["results"]] for r in after]
    assert strip == [[(h["id"], h["score"]) for h in r["results"]] for r in again]


def test_cached_leaf_columns_behind_the_floor_count_what_plain_sql_counts(tmp_path: Path, small_log):
    path = tmp_path / "memory.db"
    with Memory(path, embedder=None) as reader, Memory(path, embedder=None) as writer:
        sid = writer.start_session()["session_id"]
        ids = [writer.learn(f"trial {i}", context={"params": {"f": i % 3}, "task": {"success": i % 2 == 0}},
                            session_id=sid)["memory_id"] for i in range(60)]
        reader.outcome_stats("params.f")  # the reader's columns now stand at this seq
        for m in ids[:20]:
            writer.update(m, f"trial changed {m}", context={"params": {"f": 7}, "task": {"success": True}})
        writer.end_session(sid, outcome_score=0.5)
        assert prune_change_log(writer.store) > 0
        got = {g["value"]: g["memories"] for g in reader.outcome_stats("params.f")["groups"]}
        expected = dict(writer._db.connection().execute(
            "SELECT json_extract(context, '$.params.f'), count(*) FROM memories WHERE status = 'active' "
            "AND json_extract(context, '$.params.f') IS NOT NULL GROUP BY 1").fetchall())
        assert got == expected and got[7] == 20


def test_a_long_running_writer_keeps_its_change_log_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(change_log, "KEEP_ROWS", 500)
    monkeypatch.setattr(change_log, "PAGE_ROWS", 200)
    monkeypatch.setattr(log_pruning, "PRUNE_EVERY", 500)
    path = tmp_path / "memory.db"
    with Memory(path, embedder=GivenVectors()) as mem:
        for batch in range(30):
            ids = _fill(mem, 100, start=batch * 100)
            mem.forget(ids[0], "test")
            # The checkpoint thread's upkeep, whatever the service registered, run to its end now
            # rather than whenever the thread is scheduled and wins the write lock.
            mem._db.settle_upkeep()
            # Kept: 500 rows and fewer than 500 changes since the last prune.
            assert _log_rows(mem) < 500 + 500, batch
        assert mem._db.connection().execute("SELECT seq FROM change_log_floor").fetchall()


class _Recorded:
    """_IN_SQLITE, recording who holds it when."""

    def __init__(self, events: list[str]) -> None:
        self._lock, self._events = threading.Lock(), events

    def acquire(self, *args: object) -> bool:
        got = self._lock.acquire(*args)  # type: ignore[arg-type]
        self._events.append("acquire")
        return got

    def release(self) -> None:
        self._events.append("release")
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    __enter__ = acquire

    def __exit__(self, *exc: object) -> None:
        self.release()


def _old_log(mem: Memory, rows: int) -> None:
    """A log as an older version left it: never pruned."""
    with mem._db.write() as conn:
        conn.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
                     "INSERT INTO change_log (memory_id, collection) SELECT i, 'default' FROM n", (rows,))


def test_the_first_prune_of_an_old_log_holds_the_fork_lock_a_page_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(change_log, "KEEP_ROWS", 50)
    monkeypatch.setattr(change_log, "PAGE_ROWS", 10)
    events: list[str] = []
    monkeypatch.setattr(connection, "_IN_SQLITE", _Recorded(events))
    with Memory(tmp_path / "memory.db", embedder=None) as mem:
        _old_log(mem, 1000)
        pruner = log_pruning.Pruner(None)

        def page(conn: apsw.Connection) -> bool:
            before = conn.execute("SELECT count(*) FROM change_log").fetchone()[0]
            more = pruner(conn)
            events.append(f"deleted {before - conn.execute('SELECT count(*) FROM change_log').fetchone()[0]}")
            return more

        checkpoint = mem._db._checkpointer.run_here
        monkeypatch.setattr(mem._db._checkpointer, "run_here",
                            lambda conn, name: (events.append("checkpoint"), checkpoint(conn, name))[1])
        mem._db.after_checkpoints(page)
        mem._db.settle_upkeep()
        assert _log_rows(mem) == 50
    pages = [e for e in events if e.startswith("deleted")]
    assert len(pages) >= 95 and all(int(e.split()[1]) <= 10 for e in pages)
    # Each page inside _IN_SQLITE on its own, a checkpoint at least every UPKEEP_STEPS_PER_WAKE pages.
    held, in_hold = False, 0
    for e in events:
        if e in ("acquire", "release"):
            held, in_hold = e == "acquire", 0
        elif e.startswith("deleted"):
            in_hold += 1
            assert held and in_hold == 1
    since = 0
    for e in events:
        since = 0 if e == "checkpoint" else since + e.startswith("deleted")
        assert since <= connection.UPKEEP_STEPS_PER_WAKE


def test_a_writer_that_always_holds_the_lock_lets_the_pruner_in_after_a_few_wakes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(change_log, "KEEP_ROWS", 50)
    monkeypatch.setattr(change_log, "PAGE_ROWS", 10)
    monkeypatch.setattr(log_pruning, "BUSY_WAIT_MS", 60_000)  # the writer below lets go well within it
    path = tmp_path / "memory.db"
    with Memory(path, embedder=None) as mem:
        _old_log(mem, 200)
    pruner, conn, writer = log_pruning.Pruner(None), apsw.Connection(str(path)), apsw.Connection(str(path))
    conn.set_busy_timeout(0)  # as the checkpoint thread's
    writer.execute("BEGIN IMMEDIATE")
    for _wake in range(log_pruning.BUSY_WAKES):
        assert pruner(conn) is False
    assert writer.execute("SELECT count(*) FROM change_log").fetchone()[0] == 200
    let_go = threading.Timer(0.2, lambda: writer.execute("COMMIT"))
    let_go.start()
    try:
        assert pruner(conn) is True  # waited for the lock, deleted a page
    finally:
        let_go.join()
    assert conn.execute("SELECT count(*) FROM change_log").fetchone()[0] == 190
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 0  # and waits for nothing again
    while pruner(conn):
        pass
    assert conn.execute("SELECT count(*) FROM change_log").fetchone()[0] == 50
    conn.close()
    writer.close()


def test_a_collection_whose_snapshot_is_being_built_keeps_its_rows(tmp_path: Path, small_log):
    # A build reads its sequence number when it starts and publishes it only at the end: while it
    # runs (its lock held), the collection's rows stay, or its overlay would start behind the floor.
    path = tmp_path / "memory.db"
    with Memory(path, embedder=GivenVectors()) as mem:
        _fill(mem, 200)
        mem.save_perceptions([{"description": f"c{i % 40} elsewhere {i}", "collection": "other"} for i in range(200)])
        folder = ann_index.index_folder(path)
        lock = ann_index.take_build_lock(folder, "default", GivenVectors.model_id)
        assert lock is not None
        with lock:
            assert prune_change_log(mem.store) > 0
            kept = dict(mem._db.connection().execute(
                "SELECT collection, count(*) FROM change_log GROUP BY collection").fetchall())
        assert kept == {"default": 200, "other": 20}
        assert prune_change_log(mem.store) > 0  # the build over (no snapshot came of it): pruned too
        assert _log_rows(mem) == 20


def test_a_page_reads_no_more_rows_than_it_may_delete_past_a_collection_held_far_back(tmp_path: Path):
    # A snapshot up to HOLD_MAX_ROWS behind holds its collection's rows: a page that read on until
    # it found page_rows rows to delete would read all of them, under the write lock, every prune.
    with Memory(tmp_path / "memory.db", embedder=None) as mem:
        with mem._db.write() as conn:
            conn.executemany("INSERT INTO change_log (memory_id, collection) VALUES (?, ?)",
                             [(i, "held" if i % 2 else "free") for i in range(1, 1001)])
        with mem._db.write() as conn:
            first = conn.execute("SELECT min(seq) FROM change_log").fetchone()[0]
            page = change_log.prune_page(conn, {"held": 0}, keep_rows=50, page_rows=10, after=first - 1)
        # The first ten rows: five of each collection; the held ones stay.
        assert page == change_log.PrunedPage(5, first + 9, True)
        with mem._db.write() as conn:
            assert conn.execute("SELECT count(*) FROM change_log WHERE seq <= ?", (page.last,)).fetchone()[0] == 5
        after, pages = page.last, 1
        while page.more:
            with mem._db.write() as conn:
                page = change_log.prune_page(conn, {"held": 0}, keep_rows=50, page_rows=10, after=after)
            assert page.last > after and page.deleted <= 5
            after, pages = page.last, pages + 1
        with mem._db.read() as conn:
            left = dict(conn.execute("SELECT collection, count(*) FROM change_log GROUP BY collection").fetchall())
    assert pages == 95  # the 950 rows below the newest 50, ten at a time
    assert left == {"held": 500, "free": 25}
