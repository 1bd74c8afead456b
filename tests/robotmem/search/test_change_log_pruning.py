"""change_log is pruned (robotmem.store.change_log, robotmem.search.log_pruning) and no reader
misses a change for it: mirrors and cached columns that fell behind the pruned floor load afresh,
a snapshot the pruning outran is given up for the exact scan. Real SQLite files, two Memory
instances on one file (each keeps its own last-seen sequence number), answers checked against
numpy over the embeddings table and plain SQL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from given_vectors import DIM, GivenVectors, vector_of

from robotmem import Memory
from robotmem.cli.commands import render_stats
from robotmem.search import ann_index, log_pruning
from robotmem.search.log_pruning import prune_change_log
from robotmem.store import change_log


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
from robotmem.store import change_log
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
            assert ann_index.outrun(conn, "default", snapshot.seq)
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
            assert not ann_index.outrun(conn, "default", snapshot.seq)
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
    written = 0
    with Memory(path, embedder=GivenVectors()) as mem:
        for batch in range(200):
            ids = _fill(mem, 100, start=batch * 100)
            mem.forget(ids[0], "test")
            written += 101
    with Memory(path, embedder=GivenVectors()) as mem:
        rows = _log_rows(mem)
        floor = mem._db.connection().execute("SELECT seq FROM change_log_floor").fetchall()
    # Pruned by the writer's own checkpoint thread: nothing here asked for it.
    # Kept: 500 rows, up to 500 more until the next prune, and what came after the last wake of the
    # checkpoint thread (it wakes every 1,000 WAL pages, about 1,000-2,000 rows here).
    assert written == 20_200 and rows < written // 5 and floor


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
