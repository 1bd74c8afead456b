"""Row counts kept by triggers, so ``robotmem stats`` reads a few rows instead of every memory.

A GROUP BY over a million memories (and another over their vectors) reads every entry
of an index: about a second at 1,000,000 on a loaded machine, paid by every ``stats``.
These tables hold the same counts, kept in step by triggers on every write path (raw SQL
included), so stats reads a handful of rows. Rows whose count drops to zero are kept:
stats leaves them out.
"""

from __future__ import annotations

import apsw

from .connection import scalar
from .leaves import MARKER_ABSENT

__all__ = ["COUNTS_SCHEMA", "DEFER_INSERT_COUNTS", "EMBEDDING_KEYS", "MEMORY_KEYS", "UNMARKED_INSERT_COUNTS",
           "add_counts_sql", "collection_size"]


def _bump(table: str, columns: tuple[str, ...], row: str, delta: str) -> str:
    """Add ``delta`` to the count of the key that row ``row`` (new/old) holds."""
    keys = ", ".join(columns)
    values = ", ".join(f"{row}.{c}" for c in columns)
    return (f"INSERT INTO {table} ({keys}, n) VALUES ({values}, {delta}) "
            f"ON CONFLICT ({keys}) DO UPDATE SET n = n + ({delta});")


def _count_inserts(table: str, source: str, columns: tuple[str, ...], when: str = "") -> str:
    return f"""CREATE TRIGGER {source}_ai_counts AFTER INSERT ON {source}{when} BEGIN
    {_bump(table, columns, "new", "1")}
END;
"""


def _counted(table: str, source: str, columns: tuple[str, ...]) -> str:
    keys = ", ".join(columns)
    changed = " OR ".join(f"old.{c} IS NOT new.{c}" for c in columns)
    declared = ", ".join(f"{c} TEXT NOT NULL" for c in columns)
    return f"""
CREATE TABLE {table} ({declared}, n INTEGER NOT NULL, PRIMARY KEY ({keys})) WITHOUT ROWID;
{_count_inserts(table, source, columns)}CREATE TRIGGER {source}_ad_counts AFTER DELETE ON {source} BEGIN
    {_bump(table, columns, "old", "-1")}
END;
CREATE TRIGGER {source}_au_counts AFTER UPDATE OF {keys} ON {source} WHEN {changed} BEGIN
    {_bump(table, columns, "old", "-1")}
    {_bump(table, columns, "new", "1")}
END;
INSERT INTO {table} ({keys}, n) SELECT {keys}, count(*) FROM {source} GROUP BY {keys};
"""


MEMORY_KEYS = ("collection", "type", "status")
EMBEDDING_KEYS = ("collection", "model_id")
COUNTS_SCHEMA = (_counted("memory_counts", "memories", MEMORY_KEYS)
                 + _counted("embedding_counts", "embeddings", EMBEDDING_KEYS))

# Migration 12: bulk inserts count a whole batch in one statement (robotmem.store.deferred), so the
# per-row insert triggers stand aside while the bulk writer's transaction holds a row in
# leaves_deferred. Safe to run again (tests rewind user_version).
_BULK_ASIDE = f" WHEN {MARKER_ABSENT}"


def _insert_counts(when: str) -> str:
    return f"""
DROP TRIGGER IF EXISTS memories_ai_counts;
{_count_inserts("memory_counts", "memories", MEMORY_KEYS, when)}
DROP TRIGGER IF EXISTS embeddings_ai_counts;
{_count_inserts("embedding_counts", "embeddings", EMBEDDING_KEYS, when)}
"""


DEFER_INSERT_COUNTS = _insert_counts(_BULK_ASIDE)
# Migration 17: the same triggers without the look for the marker (robotmem.store.deferred).
UNMARKED_INSERT_COUNTS = _insert_counts("")


def add_counts_sql(table: str, columns: tuple[str, ...]) -> str:
    """Add ``n`` to the count of one key: parameters are the key's ``columns``, then ``n``."""
    keys = ", ".join(columns)
    marks = ", ".join("?" for _ in columns)
    return (f"INSERT INTO {table} ({keys}, n) VALUES ({marks}, ?) "
            f"ON CONFLICT ({keys}) DO UPDATE SET n = n + excluded.n")


def collection_size(conn: apsw.Connection, collection: str) -> int:
    """The collection's memories of every type and status, from the counts the triggers keep."""
    return int(scalar(conn, "SELECT coalesce(sum(n), 0) FROM memory_counts WHERE collection = ?", (collection,)))
