"""Bulk inserts index and count a whole batch at once.

The bulk writer turns its own connection's triggers off (``SQLITE_DBCONFIG_ENABLE_TRIGGER``)
for the statements that insert a batch's memories and vectors; the batch's leaves, full-text
entries, counts and log rows are then written by one statement each (leaves in key order, so
each index page is touched once per batch instead of once per row). The switch is this
connection's alone and is on again as soon as the batch's rows are in, so every other insert,
raw SQL and other connections included, still goes through the triggers.

Before the switch, this module wrote a marker row (``leaves_deferred``) and the insert triggers
of the leaf index (migration 9), of full text (migration 10), of the counts and of the vectors'
change log (migration 12) looked for it in their ``WHEN``. A trigger stopped by its ``WHEN``
still ran its program for every row: 6 ms of a 1,000-vector batch at 1,000,000 memories, where
the switch runs none. Migration 17 made those triggers anew without the look and dropped the
table. The memories' insert trigger of the change log (migration 11) fires only for an id below
the largest, which a new memory never has.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import apsw

from .counts import DEFER_INSERT_COUNTS, EMBEDDING_KEYS, MEMORY_KEYS, UNMARKED_INSERT_COUNTS, add_counts_sql
from .leaves import INSERT_LEAVES_RANGE, MARKER_ABSENT, UNMARKED_INSERT_LEAVES
from .pipeline import Later

__all__ = ["DEFER_FULL_TEXT", "DEFER_INSERT_COUNTS_AND_LOG", "UNMARKED_INSERT_TRIGGERS", "insert_deferring_indexes",
           "insert_new_embeddings"]


def _full_text_insert(when: str) -> str:
    return f"""
DROP TRIGGER IF EXISTS memories_ai;
CREATE TRIGGER memories_ai AFTER INSERT ON memories
    WHEN new.status IN ('active', 'archived'){when} BEGIN
    INSERT INTO memories_fts(rowid, search_text) VALUES (new.id, new.search_text);
END;
"""


def _vector_log_insert(when: str) -> str:
    return f"""
DROP TRIGGER IF EXISTS embeddings_ai_log;
CREATE TRIGGER embeddings_ai_log AFTER INSERT ON embeddings{when} BEGIN
    INSERT INTO change_log(memory_id, collection) VALUES (new.memory_id, new.collection);
END;
"""


# Migration 10: migration 1's full-text insert trigger, standing aside for bulk inserts.
# Safe to run again (tests rewind user_version).
DEFER_FULL_TEXT = _full_text_insert(f" AND {MARKER_ABSENT}")

# Migration 12: the insert count triggers and migration 1's log of new vectors stand aside too
# (a trigger program per row was about a tenth of a bulk insert). Safe to run again.
DEFER_INSERT_COUNTS_AND_LOG = DEFER_INSERT_COUNTS + _vector_log_insert(f" WHEN {MARKER_ABSENT}")

# Migration 17: the five insert triggers above without the look for the marker, which no code
# writes since the bulk writer switches its triggers off; the marker's table goes too.
UNMARKED_INSERT_TRIGGERS = (_full_text_insert("") + UNMARKED_INSERT_COUNTS + _vector_log_insert("")
                            + UNMARKED_INSERT_LEAVES + "DROP TABLE IF EXISTS leaves_deferred;\n")

_FULL_TEXT_RANGE = (
    "INSERT INTO memories_fts(rowid, search_text) SELECT id, search_text FROM memories "
    "WHERE id BETWEEN ? AND ? AND status IN ('active', 'archived')"
)
_ADD_MEMORY_COUNTS = add_counts_sql("memory_counts", MEMORY_KEYS)
_ADD_EMBEDDING_COUNTS = add_counts_sql("embedding_counts", EMBEDDING_KEYS)
_INSERT_EMBEDDING = "INSERT INTO embeddings (memory_id, collection, model_id, dim, vector) VALUES (?, ?, ?, ?, ?)"


@contextmanager
def _triggers_aside(conn: apsw.Connection) -> Iterator[None]:
    """This connection's triggers off inside the block (those of the main schema: SQLite still
    runs TEMP triggers). SQLite expires the connection's prepared statements at each switch, so
    a statement prepared inside is prepared again, with its triggers, when it runs outside."""
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
    try:
        yield
    finally:
        conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 1)


def insert_deferring_indexes(conn: apsw.Connection, insert: Callable[[], list[tuple[Any, ...]]],
                             later: Later | None = None) -> list[int]:
    """Run ``insert`` (new memories; it returns their (id, collection, type, status), ids ascending)
    with the per-row leaf, full-text and count triggers off, then index every id it returned, one
    statement each, and count the rows by what they returned. Call inside a write transaction.
    ``later``: the two index statements (no Python in them) are appended to it instead of run."""
    with _triggers_aside(conn):
        rows = insert()
    ids = [int(row[0]) for row in rows]
    if ids:
        # Ids only grow and the write lock is held: the range holds exactly the new rows.
        span = (ids[0], ids[-1])
        index = [functools.partial(_run, statement, span) for statement in (INSERT_LEAVES_RANGE, _FULL_TEXT_RANGE)]
        if later is None:
            for statement in index:
                statement(conn)
        else:
            later.extend(index)
        # Counted from the returned keys: grouping the new rows again read every one of them
        # (7 ms of a 1,000-row batch at 1,000,000 memories).
        counts = Counter(tuple(row[1:]) for row in rows)
        conn.executemany(_ADD_MEMORY_COUNTS, [(*key, n) for key, n in counts.items()])
    return ids


def _run(statement: str, params: tuple[Any, ...], conn: apsw.Connection) -> None:
    conn.execute(statement, params)


def insert_new_embeddings(conn: apsw.Connection, values: list[tuple[Any, ...]]) -> None:
    """Insert (memory_id, collection, model_id, dim, vector) rows of memories that have no vector yet
    with the per-row count and log triggers off, then log and count them, one statement each."""
    with _triggers_aside(conn):
        conn.executemany(_INSERT_EMBEDDING, values)
    conn.executemany("INSERT INTO change_log (memory_id, collection) VALUES (?, ?)", [v[:2] for v in values])
    counts = Counter((collection, model_id) for _, collection, model_id, *_ in values)
    conn.executemany(_ADD_EMBEDDING_COUNTS, [(*key, n) for key, n in counts.items()])
