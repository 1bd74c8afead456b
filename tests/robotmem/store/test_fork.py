"""A SQLite Database in a process forked after it was opened (robotmem/store/forks.py): the child's
threads run on connections of their own and checkpoint on a thread of their own; the parent's
connections are left to the parent. The service-level behaviour, on both backends, is in
tests/robotmem/test_service_fork.py."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import apsw

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
