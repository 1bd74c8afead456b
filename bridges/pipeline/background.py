"""Writing on a worker thread, so that embedding overlaps with reading (replay).

Embedding a record's description costs a few milliseconds of ONNX Runtime, which releases
the GIL; reading and converting messages is Python. With the writes on their own thread
the two overlap on a 2-core machine instead of adding up. Records are also grouped into
batches of ``batch_records`` (one transaction and one embedding call per batch).

Order is kept: every write, learn and session call goes through one FIFO queue. Reads
(``session_info``) and calls that need an answer first wait for the queue to empty. An
error on the worker is raised again in the caller's thread at its next call (or at
``drain``/``close``); operations after the failed one are not run.
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .converters.base import Record
from .stats import PipelineStats
from .writer import RecordWriter

if TYPE_CHECKING:
    from robotmem import Memory

__all__ = ["BackgroundRecordWriter"]

_STOP = None


class BackgroundRecordWriter(RecordWriter):
    def __init__(self, memory: Memory | None, stats: PipelineStats, *, batch_records: int = 64, max_queued: int = 4) -> None:
        super().__init__(memory, stats, dry_run=False)
        self.batch_records = batch_records
        self._pending: list[tuple[str, Record]] = []
        self._queue: queue.Queue[Callable[[], Any] | None] = queue.Queue(maxsize=max_queued)
        self._error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="robotmem-pipeline-writer", daemon=True)
        self._thread.start()

    # -- the caller's side ---------------------------------------------------------------
    def write(self, records: list[tuple[str, Record]]) -> None:
        self._raise_worker_error()
        self._pending.extend(records)
        if len(self._pending) >= self.batch_records:
            self._submit_pending()

    def learn(self, topic: str, insight: str, context: dict[str, Any], collection: str, session_id: str | None,
              once_key: str | None = None, occurred_at: float | None = None) -> None:
        self._submit_pending()
        self._submit(functools.partial(RecordWriter.learn, self, topic, insight, context, collection, session_id,
                                       once_key, occurred_at))

    def start_session(self, collection: str, context: dict[str, Any], session_id: str | None) -> str:
        if session_id is None:  # the store picks the id: we need its answer now
            self.drain()
            return RecordWriter.start_session(self, collection, context, None)
        self._submit_pending()
        self._submit(functools.partial(RecordWriter.start_session, self, collection, context, session_id))
        return session_id

    def end_session(self, session_id: str, score: float | None) -> None:
        self._submit_pending()
        self._submit(functools.partial(RecordWriter.end_session, self, session_id, score))

    def session_info(self, session_id: str) -> dict[str, Any] | None:
        self.drain()
        return RecordWriter.session_info(self, session_id)

    def release_session(self, session_id: str) -> None:
        self._submit_pending()  # the session's last records are written first
        self._submit(functools.partial(RecordWriter.release_session, self, session_id))

    def forget_session_records(self, session_id: str) -> int:
        self.drain()
        return RecordWriter.forget_session_records(self, session_id)

    def drain(self) -> None:
        self._submit_pending()
        self._queue.join()
        self._raise_worker_error()

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.drain()
        finally:
            self._closed = True
            self._queue.put(_STOP)
            self._thread.join()

    def abandon(self) -> None:
        """Stop the worker after a failure: what was not written yet is not written."""
        if self._closed:
            return
        self._closed = True
        self._pending = []
        self._queue.put(_STOP)
        self._thread.join()
        self._error = None

    def _submit_pending(self) -> None:
        batch, self._pending = self._pending, []
        if batch:
            self._submit(functools.partial(RecordWriter.write, self, batch))

    def _submit(self, operation: Callable[[], Any]) -> None:
        self._raise_worker_error()
        self._queue.put(operation)  # blocks when the worker is max_queued behind: back-pressure

    def _raise_worker_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    # -- the worker's side ---------------------------------------------------------------
    def _run(self) -> None:
        while True:
            operation = self._queue.get()
            try:
                if operation is _STOP:
                    return
                if self._error is None:
                    operation()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                self._error = exc
            finally:
                self._queue.task_done()
