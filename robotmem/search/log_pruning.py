"""When ``change_log`` is pruned and how far: behind the vector snapshots (robotmem.store.change_log).

A snapshot's overlay needs every row of its collection after the snapshot's sequence number, so
a collection with a published snapshot is held there (the oldest of its models'), and one whose
snapshot is being built is held at the snapshot it replaces (none: not pruned at all), since
the build's number is not known until it publishes. A snapshot more than ``HOLD_MAX_ROWS``
changes old holds nothing: a collection written to and never recalled (nothing rebuilds its
snapshot) would otherwise keep its log for good; a process that opens such a snapshot finds it
outrun and scans exactly while it is rebuilt (robotmem.search.vectors).

Who prunes: every process that writes to an embedded store, on its checkpoint thread
(:class:`Pruner`, registered by the service), once ``PRUNE_EVERY`` changes came since its
last prune, a page per transaction and a few pages per wake (the rest at its next wakes), not
waiting for the write lock until it found it taken BUSY_WAKES times in a row; and ``robotmem
reindex`` after it wrote the snapshots (:func:`prune_change_log`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw

from ..store import change_log
from ..store.change_log import immediate, newest_seq, prune, prune_page
from ..store.connection import Database
from .ann_index import building, index_folder, newest_file

__all__ = ["BUSY_WAIT_MS", "BUSY_WAKES", "HOLD_MAX_ROWS", "PRUNE_EVERY", "Pruner", "holds", "prune_change_log"]

#: A snapshot this many changes older than the newest holds its collection's rows no longer (about 24 MB).
HOLD_MAX_ROWS = 1_000_000
#: Changes between two prunes of one process: a prune's scan costs the same for few rows as for these.
PRUNE_EVERY = 10_000
#: Wakes in a row the pruner may find the write lock taken before it waits for it, BUSY_WAIT_MS at most.
BUSY_WAKES = 4
BUSY_WAIT_MS = 5


def holds(conn: apsw.Connection, folder: Path | None) -> dict[str, int]:
    """The sequence number each collection's rows are kept above, for collections that have vectors
    and a snapshot (or a build running); the others are pruned to the newest rows kept."""
    if folder is None:
        return {}
    newest = newest_seq(conn)
    held: dict[str, int] = {}
    for collection, model_id in conn.execute("SELECT collection, model_id FROM embedding_counts WHERE n > 0"):
        found = newest_file(folder, str(collection), str(model_id))
        seq = None if found is None else found[1]
        if building(folder, str(collection), str(model_id)):
            seq = seq or 0
        elif seq is not None and seq < newest - HOLD_MAX_ROWS:
            continue
        if seq is not None:
            held[str(collection)] = min(seq, held.get(str(collection), seq))
    return held


def prune_change_log(db: Database) -> int:
    """Prune every row no reader is owed; returns how many went."""
    with db.read() as conn:
        held = holds(conn, index_folder(db.path))
    return prune(db.write, held)


class Pruner:
    """The checkpoint thread's upkeep (Database.after_checkpoints): once PRUNE_EVERY changes came, a
    prune, one page per call (the thread runs a few per wake and the rest at its next wakes)."""

    def __init__(self, folder: Path | None) -> None:
        self._folder = folder
        self._pruned_at = -PRUNE_EVERY
        self._after: int | None = None  # the prune under way: the highest seq it read so far
        self._busy = 0  # calls in a row that found another writer holding the lock
        self._lock = threading.Lock()

    def __call__(self, conn: apsw.Connection) -> bool:
        """A page of the prune; True: more is left."""
        with self._lock:
            if self._after is None:
                newest = newest_seq(conn)
                if newest - self._pruned_at < PRUNE_EVERY:
                    return False
                self._pruned_at, self._after = newest, 0
            try:
                with self._waiting(conn), immediate(conn):
                    page = prune_page(conn, holds(conn, self._folder), keep_rows=change_log.KEEP_ROWS,
                                      page_rows=change_log.PAGE_ROWS, after=self._after)
            except apsw.BusyError:
                self._busy += 1
                return False
            self._busy = 0
            self._after = page.last if page.more else None
            return page.more

    @contextmanager
    def _waiting(self, conn: apsw.Connection) -> Iterator[None]:
        """After BUSY_WAKES calls that found the write lock taken, wait BUSY_WAIT_MS for it: a writer
        that always holds it (docs/benchmarks.md: 26 prunes in 61 wakes) would keep the log growing
        for ever; a writer waits at most a page for the prune."""
        if self._busy < BUSY_WAKES:
            yield
            return
        conn.set_busy_timeout(BUSY_WAIT_MS)
        try:
            yield
        finally:
            conn.set_busy_timeout(0)
