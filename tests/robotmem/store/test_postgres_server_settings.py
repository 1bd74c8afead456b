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


def _as_owner_of(path: Path, command: list[str]) -> None:
    """Run a PostgreSQL tool as the owner of the server's data folder (pgserver runs the server as
    another user when the tests run as root)."""
    import os
    import pwd
    import shlex
    import subprocess

    owner = pwd.getpwuid(path.stat().st_uid).pw_name
    if os.geteuid() == 0 and owner != "root":
        command = ["su", owner, "-s", "/bin/sh", "-c", shlex.join(command)]
    subprocess.run(command, check=True, capture_output=True, timeout=120)


def test_a_hot_standby_recalls_and_refuses_writes_with_a_storage_error(own_server: tuple[Any, Path]):
    """A real streaming replica (pg_basebackup -R). Before: recall and stats worked, but every write
    raised psycopg's own ReadOnlySqlTransaction ("cannot execute pg_current_xact_id() during
    recovery", from the SELECT of the write's transaction id), not a StorageError, and left the
    thread's connection in an aborted transaction."""
    import shutil
    import tempfile

    import pgserver

    server, pgdata = own_server
    with Memory(url=server.get_uri(), embedder=None) as primary:
        first = primary.learn("the left door sticks")["memory_id"]
    bin_dir = Path(pgserver.__file__).parent / "pginstall" / "bin"
    parent = Path(tempfile.mkdtemp(prefix="robotmem-standby-"))
    standby = parent / "data"
    shutil.chown(parent, user=pgdata.stat().st_uid)
    _as_owner_of(pgdata, [str(bin_dir / "pg_basebackup"), "-h", str(pgdata), "-U", "postgres", "-D", str(standby),
                          "-R", "-X", "stream"])
    _as_owner_of(pgdata, [str(bin_dir / "pg_ctl"), "-D", str(standby), "-l", str(standby / "log"), "-w",
                          "-o", f"-h '' -k {standby} -p 5433", "start"])  # 5432's lock file came with the copy
    try:
        with Memory(url=f"postgresql://postgres@/postgres?host={standby}&port=5433", embedder=None) as replica:
            assert [h["id"] for h in replica.recall("left door")["results"]] == [first]
            assert replica.stats()["memories"] == 1
            for _ in range(2):  # and the connection is not left in an aborted transaction
                with pytest.raises(StorageError) as info:
                    replica.learn("the right door sticks")
                assert "hot standby" in info.value.message and not info.value.transient, info.value.message
            assert [h["id"] for h in replica.recall("left door")["results"]] == [first]
    finally:
        _as_owner_of(pgdata, [str(bin_dir / "pg_ctl"), "-D", str(standby), "-m", "immediate", "stop"])
        shutil.rmtree(parent, ignore_errors=True)
