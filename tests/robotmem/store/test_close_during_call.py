"""``Memory.close()`` while another thread is inside a call: the call finishes, its connection is
closed by its own thread when the call returns, nothing is logged as a failure.

close() once closed every connection at once: a connection running a statement in another thread
made apsw raise ThreadingViolationError, logged as a traceback, and that connection was then never
closed; one between two statements of a call failed the call half done. The worker is held at a
known point with events (SQLite's busy handler, the Memory's clock), so the race is deterministic.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import apsw
import pytest

from robotmem import Memory, StorageError

WAIT_S = 30.0


class _Worker(threading.Thread):
    def __init__(self, body: Any) -> None:
        super().__init__(daemon=True)
        self.body = body
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.body()
        except BaseException as exc:  # reported by the test
            self.error = exc


def _no_failures_logged(caplog: pytest.LogCaptureFixture) -> None:
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_close_while_another_thread_runs_a_statement_leaves_it_to_that_thread(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "memory.db"
    mem = Memory(path, embedder=None)
    in_statement, go_on = threading.Event(), threading.Event()

    def busy(_tries: int) -> bool:
        # Called by SQLite inside the worker's BEGIN IMMEDIATE: its connection is mid-statement.
        in_statement.set()
        assert go_on.wait(WAIT_S)
        return True  # try again

    def learn() -> Any:
        mem.store.connection().set_busy_handler(busy)  # type: ignore[attr-defined]
        return mem.learn("the gripper slipped on the wet bottle")

    blocker = apsw.Connection(str(path))
    blocker.execute("BEGIN IMMEDIATE")  # holds the write lock: the worker waits in the busy handler
    worker = _Worker(learn)
    caplog.set_level(logging.DEBUG)
    worker.start()
    assert in_statement.wait(WAIT_S)
    mem.close()
    blocker.execute("ROLLBACK")
    go_on.set()
    worker.join(WAIT_S)

    assert worker.error is None and worker.result["status"] == "created"  # begun before close: finished
    assert mem.store.open_connections() == 0  # type: ignore[attr-defined]
    _no_failures_logged(caplog)
    blocker.close()
    with Memory(path, embedder=None) as again:
        assert again.stats()["memories"] == 1


def test_close_between_two_statements_of_a_call_lets_the_call_finish(
        db_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    # On both backends (tests/robotmem/conftest.py CONFORMANCE): begun before close, the call
    # finishes; the next call of that thread raises "closed".
    held_thread: list[int] = []
    inside, go_on = threading.Event(), threading.Event()

    def clock() -> float:
        if held_thread and threading.get_ident() == held_thread[0]:
            held_thread.clear()
            inside.set()
            assert go_on.wait(WAIT_S)
        return 1_800_000_000.0

    mem = Memory(db_path, clock=clock, embedder=None)
    memory_id = mem.learn("the gripper slipped on the wet bottle")["memory_id"]

    def get_then_get_again() -> Any:
        held_thread.append(threading.get_ident())
        first = mem.get(memory_id)  # reads the clock inside its read transaction
        with pytest.raises(StorageError, match="closed"):
            mem.get(memory_id)
        return first

    worker = _Worker(get_then_get_again)
    caplog.set_level(logging.DEBUG)
    worker.start()
    assert inside.wait(WAIT_S)
    mem.close()
    go_on.set()
    worker.join(WAIT_S)

    assert worker.error is None and worker.result["content"] == "the gripper slipped on the wet bottle"
    assert mem.store.open_connections() == 0  # type: ignore[attr-defined]
    _no_failures_logged(caplog)
