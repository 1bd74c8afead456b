"""The WAL is copied back on a thread of its own (store.connection._Checkpointer), and stays bounded
when that thread falls behind."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

from robotmem.store import connection
from robotmem.store.connection import CHECKPOINT_AT, CHECKPOINT_NOW_AT, Database

FRAME = 4096 + 24  # page size + WAL frame header


def _write_pages(db: Database, pages: int, tag: int) -> None:
    """One commit that dirties about ``pages`` pages (one 3,000-byte row per page)."""
    with db.write() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS t (tag INTEGER, data BLOB)")
        conn.executemany("INSERT INTO t VALUES (?, randomblob(3000))", [(tag,)] * pages)


def test_a_commit_past_the_threshold_is_checkpointed_by_the_checkpoint_thread(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    done = threading.Event()
    original = connection._Checkpointer.run_here

    def recorded(self: connection._Checkpointer, conn: apsw.Connection, name: str) -> None:
        original(self, conn, name)
        ran.append(threading.current_thread().name)
        done.set()

    monkeypatch.setattr(connection._Checkpointer, "run_here", recorded)
    db = Database(tmp_path / "c.db")
    try:
        _write_pages(db, CHECKPOINT_AT + 200, 1)
        assert done.wait(120), "the checkpoint thread never ran"  # a liveness guard, not a speed limit
        assert ran == ["robotmem-checkpoint"]  # not the committing thread
        reader = apsw.Connection(str(tmp_path / "c.db"))
        # Every frame is in the database file already, and a reader sees every row.
        _, frames, copied = reader.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert frames == copied > CHECKPOINT_AT
        assert reader.execute("SELECT count(*) FROM t").fetchone()[0] == CHECKPOINT_AT + 200
        reader.close()
    finally:
        db.close()
    assert not [t for t in threading.enumerate() if t.name == "robotmem-checkpoint"]


def test_the_wal_stays_bounded_when_the_checkpoint_thread_falls_behind(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection._Checkpointer, "request", lambda self: None)  # a thread that never runs
    db = Database(tmp_path / "b.db")
    wal = tmp_path / "b.db-wal"
    batch = 900
    largest = 0
    try:
        for i in range(3 * CHECKPOINT_NOW_AT // batch):
            _write_pages(db, batch, i)
            largest = max(largest, wal.stat().st_size // FRAME)
        assert CHECKPOINT_NOW_AT <= largest <= CHECKPOINT_NOW_AT + 2 * batch
        with db.read() as conn:
            assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 3 * CHECKPOINT_NOW_AT // batch * batch
    finally:
        db.close()


def test_a_wal_grown_beside_a_long_reader_is_cut_back_once_it_starts_again(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader's snapshot (a vector index rebuild holds one for 20-40 s at a million memories) stops
    checkpoints while writes go on; the WAL file grows, and without a limit kept its size for good."""
    monkeypatch.setattr(connection, "WAL_KEEP_BYTES", 300 * FRAME)
    # No checkpoint thread: a checkpoint it ran beside this test's own would be refused (busy),
    # and one running at the last write would keep the WAL from starting again.
    monkeypatch.setattr(connection._Checkpointer, "request", lambda self: None)
    db = Database(tmp_path / "w.db")
    wal = tmp_path / "w.db-wal"
    try:
        _write_pages(db, 10, 0)
        reader = apsw.Connection(str(tmp_path / "w.db"))
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM t").fetchall()  # holds its snapshot until COMMIT
        for i in range(4):
            _write_pages(db, 500, i + 1)
        grown = wal.stat().st_size // FRAME
        assert grown > 2000
        reader.execute("COMMIT")
        reader.close()
        frames, copied = db.connection().wal_checkpoint("main", apsw.SQLITE_CHECKPOINT_PASSIVE)
        assert frames == copied == grown
        _write_pages(db, 10, 9)  # starts the WAL again from its first frame
        assert wal.stat().st_size <= 300 * FRAME
        with db.read() as conn:
            assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 10 + 4 * 500 + 10
    finally:
        db.close()


def _until(done: Callable[[], bool], what: str) -> None:
    """Poll until ``done``; the deadline is a liveness guard, not a speed limit."""
    deadline = time.monotonic() + 120
    while not done():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


def test_the_wal_file_is_cut_to_nothing_once_commits_stop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a burst the WAL file kept its size (up to WAL_KEEP_BYTES, 64 MB) for as long as the store
    stayed open: a robot's card gave it back only when the process closed the store."""
    monkeypatch.setattr(connection, "IDLE_TRUNCATE_S", 0.05, raising=False)
    db = Database(tmp_path / "i.db")
    wal = tmp_path / "i.db-wal"
    try:
        _write_pages(db, CHECKPOINT_AT + 200, 1)
        assert wal.stat().st_size > CHECKPOINT_AT * FRAME
        _until(lambda: wal.stat().st_size == 0, "the WAL file was cut to nothing")
        with db.read() as conn:
            assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == CHECKPOINT_AT + 200
        _write_pages(db, 10, 2)  # the store writes on from an empty WAL
    finally:
        db.close()
    with apsw.Connection(str(tmp_path / "i.db")) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == CHECKPOINT_AT + 210


def test_a_wal_grown_beside_a_long_reader_is_cut_to_nothing_once_the_reader_is_gone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An export reads one snapshot for its whole run: writes beside it grow the WAL (215 MB for
    200,000 perceptions), and that file stayed on disk until the next write, then at 64 MB. The cut
    is put off while the reader holds its snapshot, and needs no further write once it is gone."""
    monkeypatch.setattr(connection, "IDLE_TRUNCATE_S", 0.05, raising=False)
    attempts: list[bool] = []
    original = connection._Checkpointer._truncate

    def recorded(self: connection._Checkpointer, conn: apsw.Connection) -> bool:
        cut = original(self, conn)
        attempts.append(cut)
        return cut

    monkeypatch.setattr(connection._Checkpointer, "_truncate", recorded)
    db = Database(tmp_path / "r.db")
    wal = tmp_path / "r.db-wal"
    try:
        _write_pages(db, 10, 0)
        reader = apsw.Connection(str(tmp_path / "r.db"))
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM t").fetchall()  # holds its snapshot until COMMIT
        for i in range(3):
            _write_pages(db, 600, i + 1)
        grown = wal.stat().st_size
        assert grown > 1800 * FRAME
        _until(lambda: attempts.count(False) >= 3, "three cuts put off while the reader holds its snapshot")
        assert wal.stat().st_size == grown
        assert reader.execute("SELECT count(*) FROM t").fetchone()[0] == 10  # its snapshot, whole
        reader.execute("COMMIT")
        reader.close()
        _until(lambda: wal.stat().st_size == 0, "the WAL file was cut to nothing")
        with db.read() as conn:
            assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 10 + 3 * 600
    finally:
        db.close()


def test_bookkeeping_written_on_a_readers_time_never_waits_for_a_checkpoint(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """recall's access counts (``write(wait=False)``) commit on the recall's thread. Past CHECKPOINT_NOW_AT
    frames such a commit ran a checkpoint there, after the one the checkpoint thread was running: a
    control loop's recall waited for both. The writers that grew the WAL checkpoint on their own time."""
    monkeypatch.setattr(connection._Checkpointer, "request", lambda self: None)  # only this test checkpoints
    path = tmp_path / "k.db"
    db = Database(path)
    pin = apsw.Connection(str(path))
    try:
        _write_pages(db, 10, 0)
        pin.execute("BEGIN")  # an old snapshot (a rebuild, an export): the WAL cannot start again
        pin.execute("SELECT count(*) FROM t").fetchall()
        for i in range(CHECKPOINT_NOW_AT // 2_000 + 1):
            _write_pages(db, 2_000, i + 1)
        running = db._checkpointer._running  # held by a checkpoint in progress on the checkpoint thread
        committed = threading.Event()

        def bookkeeping() -> None:
            with db.write(wait=False) as conn:
                conn.execute("INSERT INTO t VALUES (-1, x'00')")
            committed.set()

        with running:
            writer = threading.Thread(target=bookkeeping)
            writer.start()
            finished = committed.wait(30)  # a hang guard: with the lock held, a waiting commit never ends
        writer.join()
        assert finished, "a wait=False commit waited for the checkpoint in progress"
        # A commit that waits may checkpoint: the WAL stays bounded (the test above).
        with running:
            blocked = threading.Thread(target=_write_pages, args=(db, 1, -2))
            blocked.start()
            blocked.join(0.5)
            assert blocked.is_alive()  # it waits for the checkpoint in progress: this test measures what it says
        blocked.join()
    finally:
        pin.close()
        db.close()
