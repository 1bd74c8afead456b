"""Store writes that survive a busy or briefly failing store (the live bridge).

When another process holds SQLite's write lock longer than the busy timeout, robotmem
raises StorageError. Converters have already turned the messages into records by then,
so losing the write would lose seconds of trajectory. Instead every store operation
(start a session, write records, learn, end a session) goes through this outbox, in order:

* An operation that fails with a transient StorageError (``exc.transient``: the lock, the
  disk, the connection) stays at the head; it and everything behind
  it are tried again after a backoff (``initial_delay_s``, doubling up to ``max_delay_s``).
  Each failed attempt counts in ``stats.write_retries``.
* Memory stays bounded: beyond ``max_pending_records`` held records, or ``max_pending_bytes``
  of them (sizes.approx_bytes: a thumbnail is 9 KB, a compressed frame kept as it is can be
  megabytes, so a count alone bounds nothing), the oldest pending record batch is dropped
  (never the newest: memory is bounded by the larger of the bound and one batch), and an
  operation holding records (a batch, a note) still failing after ``max_attempts`` is dropped;
  both count in ``stats.records_dropped`` and are logged.
  A session's start or end holds no records and is kept until it succeeds (or ``close``
  gives up): the records behind it cannot be written without it.
* Any other error is not transient, nor is a StorageError the store marks so (a statement
  the database refuses for its content fails again the same way): that operation is dropped
  (counted, logged with the error) and the ones behind it go on.
* ``close`` keeps trying for up to ``close_timeout_s`` before it gives up on what is left.

The outbox never raises for a store error: the caller (a bridge) keeps running.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from robotmem.errors import RobotMemError, StorageError

from .sizes import approx_bytes
from .stats import PipelineStats

__all__ = ["RetryPolicy", "StoreOperation", "WriteOutbox"]

log = logging.getLogger("bridges.pipeline")

#: after the first failure of an outage, log every this many retries
_LOG_EVERY = 10


@dataclass(frozen=True)
class RetryPolicy:
    initial_delay_s: float = 0.2
    max_delay_s: float = 5.0
    #: attempts (each waits up to robotmem's busy timeout) before an operation is dropped
    max_attempts: int = 30
    #: records held for retry; beyond this the oldest pending batch is dropped
    max_pending_records: int = 2000
    #: ... and their bytes (approximate): thumbnails and chunks are KBs, but a kept compressed frame
    #: or a large JSON perception is not; 64 MB holds minutes of a robot's records
    max_pending_bytes: int = 64 * 2**20
    #: how long close() keeps retrying what is still pending
    close_timeout_s: float = 30.0
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)

    def __post_init__(self) -> None:
        if not (0 < self.initial_delay_s <= self.max_delay_s):
            raise ValueError("need 0 < initial_delay_s <= max_delay_s")
        if self.max_attempts < 1 or self.max_pending_records < 1 or self.max_pending_bytes < 1:
            raise ValueError("max_attempts, max_pending_records and max_pending_bytes must be at least 1")


@dataclass
class StoreOperation:
    """One store call, run (again) by the outbox until it succeeds or is given up."""

    what: str
    run: Callable[[], None]
    #: (topic, record) pairs it still has to write (empty for session operations); a
    #: write that got part of the way removes what it wrote, so a retry writes the rest
    records: list[tuple[str, Any]] = field(default_factory=list)
    attempts: int = 0
    #: (how many records, their bytes) when last sized: sized again only when a partial write took some
    _sized: tuple[int, int] = field(default=(0, 0), init=False, repr=False)

    def nbytes(self) -> int:
        if self._sized[0] != len(self.records):
            self._sized = (len(self.records), sum(approx_bytes(record) for _, record in self.records))
        return self._sized[1]


class WriteOutbox:
    """An ordered queue of store operations with bounded retry; single-threaded (the pipeline's thread)."""

    def __init__(self, policy: RetryPolicy, stats: PipelineStats) -> None:
        self.policy = policy
        self.stats = stats
        self._ops: deque[StoreOperation] = deque()
        #: records held and their bytes, recounted by the owning thread after each change (others read
        #: them for display)
        self.held_records = 0
        self.held_bytes = 0
        self._delay = policy.initial_delay_s
        self._next_try = 0.0
        self._failing_since: float | None = None

    @property
    def pending_records(self) -> int:
        return self.held_records

    def _recount(self) -> int:
        self.held_records = sum(len(op.records) for op in self._ops)
        self.held_bytes = sum(op.nbytes() for op in self._ops)
        return self.held_records

    def __len__(self) -> int:
        return len(self._ops)

    def submit(self, operation: StoreOperation) -> None:
        """Queue an operation and run what is due (at once, unless a retry is waiting)."""
        self._ops.append(operation)
        # Tried before it is bounded: the bound is for what waits on a failing store, and a healthy
        # store must get a batch larger than it (a chunk of kept frames) rather than see it dropped.
        self.pump()
        self._bound_memory()
        self._recount()

    def pump(self, *, force: bool = False) -> None:
        """Run queued operations in order; stop at the first that fails with a transient StorageError."""
        if not self._ops or (not force and self.policy.clock() < self._next_try):
            return
        try:
            self._run_in_order()
        finally:
            self._recount()

    def _run_in_order(self) -> None:
        while self._ops:
            operation = self._ops[0]
            try:
                operation.run()
            except StorageError as exc:
                if not exc.transient:
                    log.error("%s failed in the store and was dropped (retrying cannot help): %s", operation.what,
                              exc)
                    self._drop(operation)
                elif self._failed(operation, exc):
                    return
            except RobotMemError as exc:
                log.error("%s refused by robotmem and dropped: %s", operation.what, exc)
                self._drop(operation)
            except Exception:  # a bug must not wedge every write behind it
                log.exception("%s failed and was dropped", operation.what)
                self._drop(operation)
            else:
                self._succeeded(operation)

    def close(self) -> None:
        """Keep trying for ``close_timeout_s``; then drop (and count) what is left."""
        deadline = self.policy.clock() + self.policy.close_timeout_s
        self.pump(force=True)
        while self._ops and self.policy.clock() < deadline:
            self.policy.sleep(min(self._delay, max(0.0, deadline - self.policy.clock())))
            self.pump(force=True)
        if self._ops:
            log.error("store still failing at close: %d operations (%d records) dropped",
                      len(self._ops), self._recount())
            while self._ops:
                self._drop(self._ops[0])
        self._recount()

    # -- internals -----------------------------------------------------------------------
    def _failed(self, operation: StoreOperation, exc: StorageError) -> bool:
        """Count the failure; True: wait and retry later, False: dropped, go on with the next."""
        operation.attempts += 1
        self.stats.write_retries += 1
        now = self.policy.clock()
        if self._failing_since is None:
            self._failing_since = now
            log.warning("store write failed (%s); holding %d records and retrying", exc, self._recount())
        elif self.stats.write_retries % _LOG_EVERY == 0:
            log.warning("store still failing after %.1f s (%d retries, %d records held): %s",
                        now - self._failing_since, self.stats.write_retries, self._recount(), exc)
        # An operation holding no records (a session's start or end) is never given up for its attempts:
        # it costs no memory, and the records queued behind it need it (their session's start given up,
        # every one of them was refused once the store came back).
        if operation.attempts >= self.policy.max_attempts and operation.records:
            log.error("%s dropped after %d failed attempts: %s", operation.what, operation.attempts, exc)
            self._drop(operation)
            return False
        self._next_try = now + self._delay
        self._delay = min(self._delay * 2, self.policy.max_delay_s)
        return True

    def _succeeded(self, operation: StoreOperation) -> None:
        self._ops.popleft()
        if self._failing_since is not None:
            log.warning("store writable again after %.1f s", self.policy.clock() - self._failing_since)
            self._failing_since = None
        self._delay = self.policy.initial_delay_s
        self._next_try = 0.0

    def _drop(self, operation: StoreOperation) -> None:
        self._ops.remove(operation)
        self.stats.records_dropped += len(operation.records)
        for topic, _ in operation.records:
            self.stats.topic(topic).store_dropped += 1

    def _bound_memory(self) -> None:
        held = self._recount()
        held_bytes = self.held_bytes
        # The newest batch is kept even when it alone is over a bound (a chunk of kept frames over
        # --held-mb): dropped at its first failure, every such chunk was lost to a store busy for a
        # moment. Memory stays bounded by the larger of the bound and one batch.
        while (held > self.policy.max_pending_records or held_bytes > self.policy.max_pending_bytes) and \
                sum(1 for op in self._ops if op.records) > 1:
            oldest = next(op for op in self._ops if op.records)
            log.error("store unavailable and %d records (%.1f MB) held: dropping the oldest batch (%s, %d records)",
                      held, held_bytes / 2**20, oldest.what, len(oldest.records))
            held -= len(oldest.records)
            held_bytes -= oldest.nbytes()
            self._drop(oldest)
