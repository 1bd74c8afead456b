"""``Memory.close()`` on a PostgreSQL store while another thread is inside a call, as
test_close_during_call.py for SQLite (whose test of a close between two statements of a call
runs on both backends): the call finishes, its connection is closed by its own thread when the
call returns, no connection is left open on the server, nothing is logged as a failure.

close() once closed every connection at once from the calling thread: psycopg closed the socket
under a statement another thread was waiting on, which failed that call with "the connection to
PostgreSQL was lost". The worker is held inside its statement by a lock another connection holds,
so the race is deterministic.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import psycopg
import pytest

from test_close_during_call import WAIT_S, _no_failures_logged, _Worker

from robotmem import Memory, StorageError



def _robotmem_backends(admin: psycopg.Connection[Any]) -> list[str | None]:
    """What each open robotmem connection of the server waits for (``Lock``: a lock, inside a statement)."""
    return [r[0] for r in admin.execute(
        "SELECT wait_event_type FROM pg_stat_activity WHERE application_name = 'robotmem'").fetchall()]


def _wait_until(check: Any) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture
def blocker(postgres_url: str) -> Any:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        yield conn


@pytest.fixture
def watcher(postgres_url: str) -> Any:
    """Reads pg_stat_activity outside any transaction (inside one, it is read once and kept)."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        yield conn


# The lock the blocker holds: recall's read waits on any; SHARE lets learn's reads (it looks for
# the fact first, in a read transaction of its own) through and holds its INSERT, in the write.
LOCKS = {"recall": "ACCESS EXCLUSIVE", "learn": "SHARE"}


@pytest.mark.parametrize("call", sorted(LOCKS))
def test_close_while_another_thread_waits_in_a_statement_lets_the_call_finish(
        postgres_url: str, blocker: Any, watcher: Any, call: str, caplog: pytest.LogCaptureFixture) -> None:
    mem = Memory(postgres_url, embedder=None)
    mem.learn("the gripper slipped on the wet bottle")
    mem.close()  # the next Memory is the only robotmem connection: the count below is its own
    mem = Memory(postgres_url, embedder=None)
    blocker.execute("BEGIN")
    blocker.execute(f"LOCK TABLE memories IN {LOCKS[call]} MODE")  # the worker's statement waits on it
    worker = _Worker(lambda: mem.recall("gripper bottle") if call == "recall" else mem.learn("the lidar is dirty"))
    caplog.set_level(logging.DEBUG)
    worker.start()
    _wait_until(lambda: "Lock" in _robotmem_backends(watcher))
    mem.close()
    blocker.execute("COMMIT")
    worker.join(WAIT_S)

    assert not worker.is_alive() and worker.error is None  # begun before close: finished
    if call == "recall":
        assert [h["content"] for h in worker.result["results"]] == ["the gripper slipped on the wet bottle"]
    else:
        assert worker.result["status"] == "created"
    _wait_until(lambda: _robotmem_backends(watcher) == [])  # nothing left open
    assert mem.store.open_connections() == 0  # type: ignore[attr-defined]
    _no_failures_logged(caplog)
    with pytest.raises(StorageError, match="closed"):
        mem.stats()
    with Memory(postgres_url, embedder=None) as again:
        assert again.stats()["memories"] == (1 if call == "recall" else 2)
