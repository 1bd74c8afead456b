"""Several processes on one SQLite file: nothing lost, nothing doubled, no "database is locked"."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import apsw
import reliability_workers as workers

from robotmem import Memory

PROCESSES = 4


def _pool() -> ProcessPoolExecutor:
    return ProcessPoolExecutor(PROCESSES, mp_context=multiprocessing.get_context("spawn"))


def _texts_by_id(db: Path) -> dict[int, str]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {int(i): str(t) for i, t in conn.execute("SELECT id, content FROM memories")}
    finally:
        conn.close()


def test_processes_learning_one_sentence_at_the_same_instant_store_it_once(tmp_path: Path) -> None:
    db, rounds = tmp_path / "same.db", 15
    Memory(db, embedder=None).close()
    with multiprocessing.get_context("spawn").Manager() as manager, _pool() as pool:
        barrier = manager.Barrier(PROCESSES)
        runs = [pool.submit(workers.learn_same_sentence, str(db), rounds, barrier, None) for _ in range(PROCESSES)]
        statuses = [run.result(timeout=300) for run in runs]
    for r in range(rounds):
        assert sorted(s[r] for s in statuses) == ["created"] + ["duplicate"] * (PROCESSES - 1), f"round {r}"
    texts = list(_texts_by_id(db).values())
    assert len(texts) == len(set(texts)) == rounds


def test_threads_learning_one_sentence_with_the_model_store_it_once(tmp_path: Path) -> None:
    import threading

    with Memory(tmp_path / "threads.db", embedder="auto") as memory:
        assert memory.embedder is not None
        barrier = threading.Barrier(8)
        results: list[str] = []

        def learn() -> None:
            barrier.wait()
            results.append(memory.learn("the blue bowl is heavier than it looks")["status"])

        threads = [threading.Thread(target=learn) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(results) == ["created"] + ["duplicate"] * 7
        found = memory.recall("", context_filter={"task.name": {"$exists": False}}, n=20, min_confidence=0)
        assert [r["content"] for r in found["results"]] == ["the blue bowl is heavier than it looks"]


def test_mixed_writers_in_several_processes_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "mixed.db"
    Memory(db, embedder=None).close()
    with _pool() as pool:
        runs = [pool.submit(workers.mixed_writer, str(db), w, 150, w) for w in range(PROCESSES)]
        acknowledged = [pair for run in runs for pair in run.result(timeout=300)]
    stored = _texts_by_id(db)
    assert len(acknowledged) > 100
    missing = [(i, t) for i, t in acknowledged if stored.get(i) != t]
    assert not missing, f"{len(missing)} acknowledged writes are not in the store: {missing[:3]}"
    conn = apsw.Connection(str(db))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
