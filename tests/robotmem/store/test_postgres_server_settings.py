"""Settings a DBA puts on a shared server (statement_timeout, lock_timeout), against a real server."""

from __future__ import annotations

import queue
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from robotmem import Memory, StorageError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "search"))
from given_vectors import GivenVectors  # noqa: E402


def _admin(url: str) -> Any:
    import psycopg

    return psycopg.connect(url, autocommit=True)


def _with_option(url: str, setting: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}options=-c{setting.replace('=', '%3D')}"


def test_a_statement_timeout_names_the_setting_and_what_to_do(postgres_url: str):
    with Memory(url=_with_option(postgres_url, "statement_timeout=200"), embedder=GivenVectors()) as mem:
        mem.learn("the left door sticks")
        with _admin(postgres_url) as holder:  # a statement that outlasts the limit: it waits for this lock
            holder.execute("BEGIN")
            holder.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(StorageError) as info:
                mem.learn("the right door sticks")
            holder.execute("ROLLBACK")
        message = info.value.message
        assert "statement timeout" in message and "ALTER ROLE ... SET statement_timeout" in message, message
        assert "PGOPTIONS='-c statement_timeout=0'" in message
        assert mem.stats()["memories"] == 1
        assert mem.learn("the right door sticks")["status"] == "created"  # nothing half-written, and it goes on


def test_a_connection_whose_vector_type_lookup_was_cancelled_is_not_kept(postgres_url: str):
    """A new connection looks the pgvector type up (register_vector). Before, any failure of that
    lookup (here the server's lock_timeout; also a statement_timeout or a lost connection) was
    swallowed and the connection kept: every later write of a vector on that thread failed for good
    with "cannot adapt type 'ndarray'" (not transient). Now the call fails, transient, and the next
    one opens a connection that works."""
    mem = Memory(url=_with_option(postgres_url, "lock_timeout=200"), embedder=GivenVectors())
    mem.learn("seed")
    calls: queue.Queue[int] = queue.Queue()
    outcomes: list[str] = []

    def worker() -> None:  # one thread: its own connection, opened during the first call
        for n in range(2):
            calls.get()
            try:
                outcomes.append(mem.learn(f"written by the worker, call {n}")["status"])
            except StorageError as exc:
                outcomes.append(f"{exc.transient}: {exc.message}")
            calls.task_done()

    threading.Thread(target=worker, daemon=True).start()
    with _admin(postgres_url) as holder:
        holder.execute("BEGIN")
        holder.execute("LOCK TABLE pg_catalog.pg_type IN ACCESS EXCLUSIVE MODE")
        calls.put(0)
        calls.join()
        holder.execute("ROLLBACK")
    calls.put(1)
    calls.join()
    mem.close()
    assert outcomes[0].startswith("True: ") and "lock timeout" in outcomes[0], outcomes
    assert outcomes[1] == "created", outcomes
