"""A Memory opened before a fork (os.fork, multiprocessing's "fork" start method: DataLoader
workers, a ProcessPoolExecutor), on both backends: the child gets connections of its own, leaves
the parent's connections, claims, access counts and bulk writers to the parent, and the parent's
and the child's writes are all stored once (robotmem/store/forks.py, docs/reliability.md).

Each child reports through a pipe and ends with os._exit, as multiprocessing's children do.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest

from robotmem import ConflictError, Memory


def _in_child(body: Callable[[], Any]) -> Any:
    """``body()``'s result (JSON), run in a forked child; its exception as {"error": type, "message": ...}."""
    return _result(*_fork(body))


def _fork(body: Callable[[], Any]) -> tuple[int, int]:
    """The child running ``body`` (its pid) and the end of the pipe its result comes through."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        os.close(read_end)
        try:
            try:
                out: Any = body()
            except Exception as exc:  # noqa: BLE001 - reported to the parent
                out = {"error": type(exc).__name__, "message": str(exc)}
            os.write(write_end, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    return pid, read_end


def _result(pid: int, read_end: int) -> Any:
    with os.fdopen(read_end, "rb") as pipe:
        text = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return json.loads(text)


def _contents(db_path: Any) -> list[str]:
    """The stored contents, read without robotmem."""
    if isinstance(db_path, Path):
        conn = apsw.Connection(str(db_path))
        try:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            return [row[0] for row in conn.execute("SELECT content FROM memories ORDER BY id")]
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(db_path) as conn:
        return [row[0] for row in conn.execute("SELECT content FROM memories ORDER BY id")]


def test_a_forked_child_writes_on_connections_of_its_own_and_leaves_the_parents_open(
        mem: Memory, db_path: Any) -> None:
    # Before: on PostgreSQL the child wrote through the parent's socket ("server sent data without
    # prior row description"), and its close() ended the parent's session.
    mem.learn("the parent's fact before the fork", {})

    def child() -> Any:
        for i in range(10):
            mem.learn(f"the child's fact {i}", {})
        found = mem.recall("child's fact")
        mem.close()  # a with-block's end in the child: must not close the parent's connections
        return len(found["results"])

    assert _in_child(child) > 0
    for i in range(10):
        mem.learn(f"the parent's fact {i} after the fork", {})
    assert mem.recall("parent's fact")["results"]
    stored = _contents(db_path)
    expected = {"the parent's fact before the fork", *(f"the child's fact {i}" for i in range(10)),
                *(f"the parent's fact {i} after the fork" for i in range(10))}
    assert sorted(stored) == sorted(expected)  # each once


def test_a_forked_child_and_its_parent_write_at_once(mem: Memory, db_path: Any) -> None:
    # Before: on PostgreSQL both wrote through the parent's socket, each reading the other's answers:
    # "server sent data without prior row description" in one, "current transaction is aborted" in
    # the other, and writes of both lost.
    mem.learn("the parent's fact before the fork", {})

    def child() -> Any:
        for i in range(30):
            mem.learn(f"the child's fact {i}", {})
        return "stored"

    running = _fork(child)
    for i in range(30):
        mem.learn(f"the parent's fact {i}", {})
    assert _result(*running) == "stored"
    expected = {"the parent's fact before the fork", *(f"the child's fact {i}" for i in range(30)),
                *(f"the parent's fact {i}" for i in range(30))}
    assert sorted(_contents(db_path)) == sorted(expected)


def test_a_claim_stays_the_parents_when_a_forked_child_leaves_the_block(mem: Memory, db_path: Any) -> None:
    # Before: the child's release removed the claim file (SQLite) or ended the claim's connection
    # (PostgreSQL), and another process claimed the name while the parent held it.
    name = f"replay-{uuid.uuid4().hex}"
    with Memory(db_path, embedder=None) as other:
        with contextlib.ExitStack() as block:
            block.enter_context(mem.exclusive(name))

            def child() -> Any:
                block.close()  # the child leaves the block it was forked in
                return "left"

            assert _in_child(child) == "left"
            with pytest.raises(ConflictError):
                with other.exclusive(name):
                    pass
        with other.exclusive(name):  # the parent let go at the end of its block
            pass


def test_access_counts_waiting_at_a_fork_are_written_once(mem: Memory, db_path: Any) -> None:
    # Before: the child inherited the counts the parent had not written yet and wrote them too.
    memory_id = mem.learn("the wet glass slips at 8 N", {})["memory_id"]
    assert mem.recall("wet glass")["results"]

    def child() -> Any:
        mem.close()  # writes the child's own access counts
        return "closed"

    assert _in_child(child) == "closed"
    mem.close()
    with Memory(db_path, embedder=None) as fresh:
        assert fresh.get(memory_id)["access_count"] == 1


def test_a_bulk_writer_refuses_a_forked_child_and_keeps_working_in_the_parent(mem: Memory, db_path: Any) -> None:
    # Before: the child's batch went to a commit thread that only the parent has, and the child's
    # flush() waited for good.
    record = {"description": "joint state", "perception_type": "proprioceptive", "data": {"q": [1.0, 2.0]}}
    with mem.bulk_writer() as writer:
        writer.save_perceptions([record])
        writer.flush()

        def child() -> Any:
            writer.save_perceptions([dict(record, description="the child's joint state")])
            return "stored"

        refused = _in_child(child)
        assert refused["error"] == "StorageError"
        assert "bulk_writer()" in refused["message"]
        writer.save_perceptions([dict(record, description="the parent's joint state after the fork")])
    assert sorted(_contents(db_path)) == ["joint state", "the parent's joint state after the fork"]


def test_a_memory_sent_to_another_process_says_to_open_one_there(mem: Memory) -> None:
    # Before: "cannot pickle '_thread.lock' object" (multiprocessing's spawn start method).
    with pytest.raises(TypeError, match=r"open one there with Memory\("):
        pickle.dumps(mem)


@pytest.mark.sqlite_only
def test_the_probe_threads_of_the_vector_snapshot_are_the_childs_own(mem: Memory) -> None:
    # Before: a child used the parent's probe executor, whose threads only the parent has and which
    # counted one idle: the child's probe never ran and its recall waited for good.
    from concurrent.futures import ThreadPoolExecutor

    vectors = mem.recall_engine._vectors  # a white-box seam: building an ANN snapshot takes minutes
    vectors._prober = ThreadPoolExecutor(max_workers=2)
    vectors._prober.submit(int).result()  # a worker ran and is idle
    assert _in_child(lambda: vectors._prober is None)
    vectors._prober.shutdown()
