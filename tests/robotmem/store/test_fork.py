"""A SQLite Database in a process forked after it was opened (robotmem/store/forks.py): the child's
threads run on connections of their own and checkpoint on a thread of their own; the parent's
connections are left to the parent. The service-level behaviour, on both backends, is in
tests/robotmem/test_service_fork.py."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import apsw

from robotmem.errors import StorageError
from robotmem.store.connection import CHECKPOINT_AT, Database


def _write_pages(db: Database, pages: int, tag: int) -> None:
    with db.write() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS t (tag INTEGER, data BLOB)")
        conn.executemany("INSERT INTO t VALUES (?, randomblob(3000))", [(tag,)] * pages)


def test_a_forked_child_opens_its_own_connection_and_checkpoint_thread(tmp_path: Path) -> None:
    # Before: the child ran on the parent's connection (SQLite: never carry an open connection
    # across a fork; its locks are the parent process's), and its commits asked the parent's
    # checkpoint thread, which is not in the child, so nothing copied its WAL back.
    db = Database(tmp_path / "f.db")
    try:
        _write_pages(db, CHECKPOINT_AT + 10, 1)  # the parent's checkpoint thread has started
        parents = id(db.connection())
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's coverage is not collected
            try:
                own = id(db.connection()) != parents
                _write_pages(db, CHECKPOINT_AT + 10, 2)
                checkpointing = any(t.name == "robotmem-checkpoint" for t in threading.enumerate())
                os.write(write_end, f"{own} {checkpointing}".encode())
            finally:
                os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end) as pipe:
            assert pipe.read() == "True True"
        os.waitpid(pid, 0)
        _write_pages(db, 10, 3)  # the parent's connection still works
    finally:
        db.close()
    check = apsw.Connection(str(tmp_path / "f.db"))
    assert check.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert check.execute("SELECT tag, count(*) FROM t GROUP BY tag ORDER BY tag").fetchall() == [
        (1, CHECKPOINT_AT + 10), (2, CHECKPOINT_AT + 10), (3, 10)]
    check.close()


def test_a_child_forked_while_another_thread_writes_is_told_it_cannot_write(tmp_path: Path) -> None:
    """SQLite keeps a file's locks per process: a child forked while another thread of its parent
    was inside a write transaction holds a copy of that write lock nothing in it releases. Its
    writes waited out the busy timeout (10 s by default) and failed as "busy", transient, "retry",
    also after the parent had committed, for as long as it lived. Now they fail at once, not
    transient, saying why and what to do; reading still works. Other stores, and a child forked
    with no write open, are not refused (the test above)."""
    db = Database(tmp_path / "f.db", busy_timeout_ms=200)
    other = Database(tmp_path / "g.db", busy_timeout_ms=200)
    try:
        _write_pages(db, 1, 1)
        _write_pages(other, 1, 1)
        holding, release = threading.Event(), threading.Event()

        def writer() -> None:
            with db.write() as conn:
                conn.execute("INSERT INTO t VALUES (2, NULL)")
                holding.set()
                release.wait()

        thread = threading.Thread(target=writer)
        thread.start()
        holding.wait()
        read_end, write_end = os.pipe()
        committed_read, committed_write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's coverage is not collected
            try:
                os.close(committed_write)
                os.read(committed_read, 1)  # after the parent's commit
                outcome = []
                try:
                    _write_pages(db, 1, 3)
                    outcome.append("wrote")
                except StorageError as exc:
                    outcome.append(f"{'forked' in exc.message} {exc.transient}")
                with db.read() as conn:
                    outcome.append(str(conn.execute("SELECT count(*) FROM t").fetchone()[0]))
                _write_pages(other, 1, 3)  # another file: no lock of the parent's
                os.write(write_end, " ".join(outcome).encode())
            finally:
                os._exit(0)
        os.close(write_end)
        os.close(committed_read)
        release.set()
        thread.join()
        os.write(committed_write, b"c")
        os.close(committed_write)
        with os.fdopen(read_end) as pipe:
            assert pipe.read() == "True False 2"  # refused, not transient; it reads the parent's commit
        os.waitpid(pid, 0)
        _write_pages(db, 1, 4)  # the parent writes on
    finally:
        db.close()
        other.close()


def test_a_fork_waits_for_the_checkpoint_thread_to_leave_sqlite(tmp_path: Path) -> None:
    """The checkpoint thread starts with the commit that asks for it and opens its connection: a
    fork at that instant (the test above, once in a whole-suite run) left the child's first
    connection waiting for ever on a process-wide SQLite mutex the thread held in the parent. A
    fork now waits until the thread is out of SQLite (here: held inside its opener)."""
    from robotmem.store import connection

    inside, leave = threading.Event(), threading.Event()
    db = Database(tmp_path / "f.db")
    opener = db._checkpointer.opener

    def slow_opener() -> apsw.Connection:
        conn = opener()
        inside.set()
        leave.wait()
        return conn

    db._checkpointer.opener = slow_opener
    forked = threading.Event()
    try:
        db._checkpointer.request()
        assert inside.wait(30)

        def fork() -> None:
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child's coverage is not collected
                os._exit(0)
            forked.set()
            os.waitpid(pid, 0)

        forker = threading.Thread(target=fork)
        forker.start()
        assert not forked.wait(0.5)  # the fork waits for the thread
        assert connection._IN_SQLITE.locked()
        leave.set()
        forker.join()
        assert forked.is_set()
    finally:
        leave.set()
        db.close()
