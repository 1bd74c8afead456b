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
from typing import cast

import apsw

from .connection import scalar

__all__ = ["FLOOR_SCHEMA", "KEEP_ROWS", "PAGE_ROWS", "immediate", "missed", "newest_seq", "prune", "prune_page"]

#: The newest rows always kept: a mirror that many changes behind catches up without reloading.
#: 100,000 rows are about 2.4 MB.
KEEP_ROWS = 100_000
#: Rows deleted per write transaction: the write lock is held for a few milliseconds at a time.
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


def prune_page(conn: apsw.Connection, holds: Mapping[str, int], *, keep_rows: int, page_rows: int,
               after: int = 0) -> tuple[int, int]:
    """Delete up to ``page_rows`` of the oldest rows after ``after`` that no reader is owed: not
    among the newest ``keep_rows`` and, for a collection in ``holds``, at or below its held
    number. Call inside a write transaction. Returns (rows deleted, the highest seq deleted)."""
    below = newest_seq(conn) - max(keep_rows, 1)
    if below <= after:
        return 0, after
    bound, params = "?", list[str | int]([below])
    if holds:
        # A CASE over a few collections, evaluated inline per row (a subquery per row costs more).
        bound = "CASE collection " + "WHEN ? THEN ? " * len(holds) + "ELSE ? END"
        params = [value for collection, held in holds.items() for value in (collection, min(held, below))] + [below]
    deleted = conn.execute(
        "DELETE FROM change_log WHERE seq IN (SELECT seq FROM change_log WHERE seq > ? AND seq <= ? "
        f"AND seq <= {bound} ORDER BY seq LIMIT ?) RETURNING seq, collection",
        [after, below, *params, page_rows]).fetchall()
    floors: dict[str, int] = {}
    for seq, collection in deleted:
        floors[str(collection)] = max(floors.get(str(collection), 0), cast(int, seq))
    conn.executemany("INSERT INTO change_log_floor (collection, seq) VALUES (?, ?) "
                     "ON CONFLICT (collection) DO UPDATE SET seq = max(seq, excluded.seq)", floors.items())
    return len(deleted), max(floors.values(), default=after)


def prune(write: Callable[[], AbstractContextManager[apsw.Connection]], holds: Mapping[str, int]) -> int:
    """Prune page by page, one write transaction each (``write()`` opens one), keeping KEEP_ROWS,
    until no row is left to prune; returns the rows deleted."""
    total, after = 0, 0
    keep_rows, page_rows = KEEP_ROWS, PAGE_ROWS  # read here, not bound at import: tests make them small
    while True:
        with write() as conn:
            deleted, after = prune_page(conn, holds, keep_rows=keep_rows, page_rows=page_rows, after=after)
        total += deleted
        if deleted < page_rows:
            return total


@contextmanager
def immediate(conn: apsw.Connection) -> Iterator[apsw.Connection]:
    """A write transaction on a bare connection (a thread of robotmem's own, outside Database.write)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
