"""``change_log`` pruned behind its readers, and the floor that tells a reader it fell behind.

Triggers and bulk writes append a row (about 24 bytes on disk) per new vector, per update of a
vector, status, confidence, context or collection, and per deleted memory: 2.4 MB per 100,000
perceptions, and a robot writing at 10 Hz for months never stops (docs/benchmarks.md). Its
readers only need the rows after the sequence number they last saw: each process's exact
mirrors (robotmem.search.vector_index, robotmem.search.leaf_columns) and the overlay of a
vector snapshot (robotmem.search.ann_index), which needs every row of its collection after the
snapshot's number. None of them is known to the others, so a prune cannot wait for them all:

* rows are pruned only below a bound per collection (``holds``: the caller's; the snapshot's
  sequence number, kept while a build runs) and never the newest ``keep_rows`` rows, so a
  reader a little behind catches up as before;
* each prune raises the collection's floor (``change_log_floor``) to the highest sequence
  number it deleted, in the same transaction, and a reader whose last-seen number is below its
  collection's floor has missed rows: it loads afresh (:func:`missed`) instead.

The newest row is never pruned, so ``max(seq)`` (every reader's notion of "now") never goes back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import NamedTuple, cast

import apsw

from .connection import scalar

__all__ = ["FLOOR_SCHEMA", "KEEP_ROWS", "PAGE_ROWS", "immediate", "missed", "newest_seq", "PrunedPage", "prune", "prune_page"]

#: The newest rows always kept: a mirror that many changes behind catches up without reloading.
#: 100,000 rows are about 2.4 MB.
KEEP_ROWS = 100_000
#: Rows read (and at most deleted) per write transaction: the write lock is held for a few milliseconds at a time.
PAGE_ROWS = 5_000

FLOOR_SCHEMA = """
CREATE TABLE IF NOT EXISTS change_log_floor (
    collection TEXT PRIMARY KEY,
    seq        INTEGER NOT NULL          -- the highest change_log.seq of the collection pruned
) WITHOUT ROWID;
"""


def newest_seq(conn: apsw.Connection) -> int:
    return int(scalar(conn, "SELECT coalesce(max(seq), 0) FROM change_log"))


def missed(conn: apsw.Connection, collection: str, seen: int) -> bool:
    """Whether a reader that saw ``collection``'s changes up to sequence number ``seen`` missed
    some that a prune deleted (the collection's floor is above it). Read it after the rows read
    from ``change_log`` (or in the same read transaction): a prune in between then shows here."""
    found = conn.execute("SELECT seq FROM change_log_floor WHERE collection = ?", (collection,)).fetchone()
    return found is not None and int(found[0]) > seen


class PrunedPage(NamedTuple):
    deleted: int
    #: the highest sequence number the page read: the next page starts after it
    last: int
    #: rows below the kept ones are left after ``last``
    more: bool


def prune_page(conn: apsw.Connection, holds: Mapping[str, int], *, keep_rows: int, page_rows: int,
               after: int = 0) -> PrunedPage:
    """Of the next ``page_rows`` rows after ``after``, delete those no reader is owed: not among
    the newest ``keep_rows`` and, for a collection in ``holds``, above its held number. Call
    inside a write transaction. The page reads no more rows than it may delete, so a collection
    held far back (a snapshot up to HOLD_MAX_ROWS old) costs a page per ``page_rows`` rows, not
    one long transaction that reads them all to delete nothing."""
    below = newest_seq(conn) - max(keep_rows, 1)
    if below <= after:
        return PrunedPage(0, after, False)
    end = conn.execute("SELECT seq FROM change_log WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT 1 OFFSET ?",
                       (after, below, page_rows - 1)).fetchone()
    last = below if end is None else cast(int, end[0])
    bound, params = "?", list[str | int]([below])
    if holds:
        # A CASE over a few collections, evaluated inline per row (a subquery per row costs more).
        bound = "CASE collection " + "WHEN ? THEN ? " * len(holds) + "ELSE ? END"
        params = [value for collection, held in holds.items() for value in (collection, min(held, below))] + [below]
    deleted = conn.execute(f"DELETE FROM change_log WHERE seq > ? AND seq <= ? AND seq <= {bound} "
                           "RETURNING seq, collection", [after, last, *params]).fetchall()
    floors: dict[str, int] = {}
    for seq, collection in deleted:
        floors[str(collection)] = max(floors.get(str(collection), 0), cast(int, seq))
    conn.executemany("INSERT INTO change_log_floor (collection, seq) VALUES (?, ?) "
                     "ON CONFLICT (collection) DO UPDATE SET seq = max(seq, excluded.seq)", floors.items())
    return PrunedPage(len(deleted), last, last < below)


def prune(write: Callable[[], AbstractContextManager[apsw.Connection]], holds: Mapping[str, int]) -> int:
    """Prune page by page, one write transaction each (``write()`` opens one), keeping KEEP_ROWS,
    until no row is left to prune; returns the rows deleted."""
    total, after = 0, 0
    keep_rows, page_rows = KEEP_ROWS, PAGE_ROWS  # read here, not bound at import: tests make them small
    while True:
        with write() as conn:
            page = prune_page(conn, holds, keep_rows=keep_rows, page_rows=page_rows, after=after)
        total, after = total + page.deleted, page.last
        if not page.more:
            return total


@contextmanager
def immediate(conn: apsw.Connection) -> Iterator[apsw.Connection]:
    """A write transaction on a bare connection (a thread of robotmem's own, outside Database.write)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    finally:
        # After an error SQLite may have rolled back already, and a COMMIT that failed may leave
        # the transaction open: this connection must not keep the write lock either way.
        if conn.in_transaction:
            conn.execute("ROLLBACK")
