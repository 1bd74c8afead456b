"""PipelinedWrites on a real SQLite file: a batch's later statements and commit run on the worker."""

from __future__ import annotations

import threading
from pathlib import Path

import apsw
import pytest

from robotmem import StorageError
from robotmem.store.connection import Database


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database = Database(tmp_path / "pipe.db")
    database.connection().execute("CREATE TABLE t (id INTEGER PRIMARY KEY, x INTEGER NOT NULL)")
    return database


def _rows(db: Database) -> list[tuple[int, int]]:
    return [tuple(row) for row in db.connection().execute("SELECT id, x FROM t ORDER BY id")]  # type: ignore[misc]


def _insert(x: int | None) -> object:
    return lambda conn: conn.execute("INSERT INTO t (x) VALUES (?)", (x,))


def test_later_statements_run_after_the_block_in_its_transaction_on_the_worker(db: Database) -> None:
    writes = db.pipelined_writes()
    threads: list[str] = []
    with writes.batch() as (conn, later):
        conn.execute("INSERT INTO t (x) VALUES (1)")
        later.append(lambda c: threads.append(threading.current_thread().name))
        later.append(_insert(2))  # type: ignore[arg-type]
    writes.wait()
    assert _rows(db) == [(1, 1), (2, 2)]
    assert threads and threads[0].startswith("robotmem-batch-commit")
    writes.close()


def test_a_failed_later_statement_rolls_back_its_batch_and_is_raised_once(db: Database) -> None:
    writes = db.pipelined_writes()
    with writes.batch() as (conn, later):
        conn.execute("INSERT INTO t (x) VALUES (1)")
    with writes.batch() as (conn, later):
        conn.execute("INSERT INTO t (x) VALUES (2)")
        later.append(_insert(None))  # type: ignore[arg-type]  # NOT NULL: fails on the worker
    with pytest.raises(StorageError) as info:
        with writes.batch() as (conn, later):
            conn.execute("INSERT INTO t (x) VALUES (3)")  # never runs: the batch before failed
    assert "writing to the memory store failed" in info.value.message
    assert isinstance(info.value.__cause__, apsw.ConstraintError)
    writes.wait()  # raised once: nothing pending now
    with writes.batch() as (conn, later):
        conn.execute("INSERT INTO t (x) VALUES (4)")
    writes.close()
    assert [x for _, x in _rows(db)] == [1, 4]


def test_an_error_in_the_block_rolls_back_and_keeps_the_writer_usable(db: Database) -> None:
    writes = db.pipelined_writes()
    with pytest.raises(ZeroDivisionError):
        with writes.batch() as (conn, later):
            conn.execute("INSERT INTO t (x) VALUES (1)")
            later.append(_insert(9))  # type: ignore[arg-type]
            1 / 0  # noqa: B018
    with writes.batch() as (conn, later):
        conn.execute("INSERT INTO t (x) VALUES (2)")
    writes.close()
    assert [x for _, x in _rows(db)] == [2]


def test_a_driver_error_in_the_block_leaves_as_a_storage_error_that_is_not_transient(db: Database) -> None:
    # the caller's rows go in on its own thread: a driver error there is still robotmem's to translate
    writes = db.pipelined_writes()
    with pytest.raises(StorageError) as info:
        with writes.batch() as (conn, later):
            conn.execute("INSERT INTO t (x) VALUES (1)")
            conn.execute("INSERT INTO t (x) VALUES (NULL)")  # NOT NULL: fails the same way every time
    assert isinstance(info.value.__cause__, apsw.ConstraintError) and not info.value.transient
    with writes.batch() as (conn, later):
        conn.execute("INSERT INTO t (x) VALUES (2)")
    writes.close()
    assert [x for _, x in _rows(db)] == [2]


def test_close_raises_the_last_failure_and_still_closes(db: Database) -> None:
    writes = db.pipelined_writes()
    assert db.open_connections() == 2  # this thread's and the writer's
    with writes.batch() as (conn, later):
        later.append(_insert(None))  # type: ignore[arg-type]
    with pytest.raises(StorageError):
        writes.close()
    assert db.open_connections() == 1
    with pytest.raises(StorageError, match="closed"):
        with writes.batch():
            pass
    writes.close()  # closing again is a no-op


def test_closing_the_store_closes_a_writer_connection_left_open(db: Database) -> None:
    writes = db.pipelined_writes()
    with writes.batch() as (conn, later):
        conn.execute("INSERT INTO t (x) VALUES (1)")
    writes.wait()
    db.close()
    assert db.open_connections() == 0
    with pytest.raises(StorageError, match="closed"):
        db.pipelined_writes()


def test_batches_from_two_threads_take_turns(db: Database) -> None:
    writes = db.pipelined_writes()

    def write(base: int) -> None:
        for i in range(20):
            with writes.batch() as (conn, later):
                conn.execute("INSERT INTO t (x) VALUES (?)", (base + i,))
                later.append(_insert(-(base + i)))  # type: ignore[arg-type]

    threads = [threading.Thread(target=write, args=(base,)) for base in (1000, 2000)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    writes.close()
    xs = [x for _, x in _rows(db)]
    assert len(xs) == 80
    # Each batch's two rows are next to each other: no batch ran inside another.
    assert all(xs[k + 1] == -xs[k] for k in range(0, 80, 2))
