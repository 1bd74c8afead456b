"""Write transactions that end on a worker thread, so a bulk load's next batch is prepared meanwhile.

A batch of 1,000 perceptions spends about a third of its time in Python (validating contexts,
search text, points) and a third in SQL that needs no Python at all: the leaf index and full
text written from the batch's id range, and the commit. SQLite runs those with the GIL released,
so on a second core they can overlap the Python of the next batch. Binding rows one by one does
need the GIL (a thread waiting for it can lose 5 ms to each switch), so the rows themselves still
go in on the caller's thread; only statements given as ``later`` move.

One transaction per batch, on a connection of the writer's own: ``batch()`` first waits for the
batch before it (raising its failure once, before the new batch begins), begins, and after the
caller's block hands the ``later`` statements and the commit to the worker. A batch is stored when
the next ``batch()``, ``wait()`` or ``close()`` returns without an error. A store whose connection
can be lost (PostgreSQL) replaces it when a batch begins, by the rule its ordinary transactions
follow, so a writer kept for hours outlives a server restart or an idle timeout.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..errors import StorageError

__all__ = ["Later", "PipelinedWrites", "Transactions"]

#: Statements of a batch that run after its rows, on the worker, inside the batch's transaction.
Later = list[Callable[[Any], None]]


@dataclass(frozen=True)
class Transactions:
    """How a store begins on a connection (returning the one the batch runs on: the same, or a new one
    where the store replaced a lost connection) and commits on it (raising StorageError), rolls back
    (whatever is open, quietly), turns its driver's errors (``backend_error``: of a ``later``
    statement or of the caller's rows) into its StorageError, and closes the connection."""

    backend_error: type[Exception]
    begin: Callable[[Any], Any]
    commit: Callable[[Any], None]
    rollback: Callable[[Any], None]
    failed: Callable[[BaseException], BaseException]
    close: Callable[[Any], None]


class PipelinedWrites:
    def __init__(self, conn: Any, transactions: Transactions) -> None:
        self._conn = conn
        self._tx = transactions
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="robotmem-batch-commit")
        self._pending: Future[None] | None = None
        # One batch at a time even when several threads share the writer.
        self._lock = threading.RLock()
        self._closed = False
        # Its connection and commit thread are this process's: a forked child that used the writer
        # waited for good on a batch no thread ran (docs/reliability.md, "Forked processes").
        self._pid = os.getpid()

    def _check_process(self) -> None:
        if os.getpid() != self._pid:
            raise StorageError(f"this bulk writer belongs to process {self._pid}, which opened it; "
                               "a forked process opens its own with Memory.bulk_writer()")

    @contextmanager
    def batch(self) -> Iterator[tuple[Any, Later]]:
        """(connection, later) inside a new write transaction, once the batch before is stored."""
        self._check_process()
        with self._lock:
            if self._closed:
                raise StorageError("this bulk writer is closed")
            self.wait()
            self._conn = self._tx.begin(self._conn)
            later: Later = []
            try:
                yield self._conn, later
            except BaseException as exc:
                self._tx.rollback(self._conn)
                # The rows go in on the caller's thread, outside the store's write(): a driver
                # error there (PostgreSQL's "word is too long") must leave as a robotmem error too.
                if isinstance(exc, self._tx.backend_error):
                    raise self._tx.failed(exc) from exc
                raise
            self._pending = self._worker.submit(self._finish, later)

    def _finish(self, later: Later) -> None:
        try:
            for statement in later:
                statement(self._conn)
        except BaseException as exc:
            self._tx.rollback(self._conn)
            raise self._tx.failed(exc) from exc
        try:
            self._tx.commit(self._conn)
        except BaseException:
            self._tx.rollback(self._conn)
            raise

    def wait(self) -> None:
        """Until the batch in flight is stored; its failure is raised here, once."""
        self._check_process()
        with self._lock:
            pending, self._pending = self._pending, None
            if pending is not None:
                pending.result()

    def close(self) -> None:
        """Wait for the batch in flight (raising its failure), then close the connection (in a forked
        child: nothing, the batch and the connection are the parent's)."""
        if os.getpid() != self._pid:
            return
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self.wait()
            finally:
                self._worker.shutdown(wait=True)
                self._tx.close(self._conn)
