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
last prune, a page per transaction and never waiting for the write lock; and ``robotmem
reindex`` after it wrote the snapshots (:func:`prune_change_log`).
"""

from __future__ import annotations

import threading
from pathlib import Path

import apsw

from ..store.change_log import immediate, newest_seq, prune
from ..store.connection import Database
from .ann_index import building, index_folder, newest_file

__all__ = ["HOLD_MAX_ROWS", "PRUNE_EVERY", "Pruner", "holds", "prune_change_log"]

#: A snapshot this many changes older than the newest holds its collection's rows no longer (about 24 MB).
HOLD_MAX_ROWS = 1_000_000
#: Changes between two prunes of one process: a prune's scan costs the same for few rows as for these.
PRUNE_EVERY = 10_000


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
    """The checkpoint thread's upkeep (Database.after_checkpoints): prunes once PRUNE_EVERY changes came."""

    def __init__(self, folder: Path | None) -> None:
        self._folder = folder
        self._pruned_at = -PRUNE_EVERY
        self._lock = threading.Lock()

    def __call__(self, conn: apsw.Connection) -> None:
        with self._lock:
            newest = newest_seq(conn)
            if newest - self._pruned_at < PRUNE_EVERY:
                return
            prune(lambda: immediate(conn), holds(conn, self._folder))
            self._pruned_at = newest
