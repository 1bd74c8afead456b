"""Row counts kept by triggers, so ``robotmem stats`` reads a few rows instead of every memory.

A GROUP BY over a million memories (and another over their vectors) reads every entry
of an index: about a second at 1,000,000 on a loaded machine, paid by every ``stats``.
These tables hold the same counts, kept in step by triggers on every write path (raw SQL
included), so stats reads a handful of rows. Rows whose count drops to zero are kept:
stats leaves them out.
"""

from __future__ import annotations

__all__ = ["COUNTS_SCHEMA"]


def _bump(table: str, columns: tuple[str, ...], row: str, delta: str) -> str:
    """Add ``delta`` to the count of the key that row ``row`` (new/old) holds."""
    keys = ", ".join(columns)
    values = ", ".join(f"{row}.{c}" for c in columns)
    return (f"INSERT INTO {table} ({keys}, n) VALUES ({values}, {delta}) "
            f"ON CONFLICT ({keys}) DO UPDATE SET n = n + ({delta});")


def _counted(table: str, source: str, columns: tuple[str, ...]) -> str:
    keys = ", ".join(columns)
    changed = " OR ".join(f"old.{c} IS NOT new.{c}" for c in columns)
    declared = ", ".join(f"{c} TEXT NOT NULL" for c in columns)
    return f"""
CREATE TABLE {table} ({declared}, n INTEGER NOT NULL, PRIMARY KEY ({keys})) WITHOUT ROWID;
CREATE TRIGGER {source}_ai_counts AFTER INSERT ON {source} BEGIN
    {_bump(table, columns, "new", "1")}
END;
CREATE TRIGGER {source}_ad_counts AFTER DELETE ON {source} BEGIN
    {_bump(table, columns, "old", "-1")}
END;
CREATE TRIGGER {source}_au_counts AFTER UPDATE OF {keys} ON {source} WHEN {changed} BEGIN
    {_bump(table, columns, "old", "-1")}
    {_bump(table, columns, "new", "1")}
END;
INSERT INTO {table} ({keys}, n) SELECT {keys}, count(*) FROM {source} GROUP BY {keys};
"""


COUNTS_SCHEMA = (_counted("memory_counts", "memories", ("collection", "type", "status"))
                 + _counted("embedding_counts", "embeddings", ("collection", "model_id")))
