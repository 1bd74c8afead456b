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

__all__ = ["COUNTS_SCHEMA", "DEFER_INSERT_COUNTS", "EMBEDDING_KEYS", "MEMORY_KEYS", "PAYLOAD_COUNTS_SCHEMA",
           "UNMARKED_INSERT_COUNTS", "add_counts_sql", "collection_size"]


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


def _add_payloads(collection: str, data: str, source: str, sign: str = "") -> str:
    """Add (``sign`` "-": take away) the payloads ``source`` selects (a FROM and a WHERE; ``data``
    their bytes) to the counts of ``collection``; nothing when it selects none."""
    return (f"INSERT INTO payload_counts (collection, n, bytes) SELECT {collection}, {sign}1, {sign}length({data}) "
            f"{source} ON CONFLICT (collection) DO UPDATE SET n = n + excluded.n, bytes = bytes + excluded.bytes;")


def _payload_row(row: str, sign: str = "") -> str:
    """The payload ``row`` (new/old) counted in (or out of) its memory's collection."""
    return _add_payloads("collection", f"{row}.data", f"FROM memories WHERE id = {row}.memory_id", sign)


def _memory_payload(row: str, sign: str = "") -> str:
    """The payload of the memory ``row`` (new/old), if it has one, counted in (or out of) its collection."""
    return _add_payloads(f"{row}.collection", "data", f"FROM payloads WHERE memory_id = {row}.id", sign)


def _trigger(name: str, event: str, *statements: str) -> str:
    """Trigger ``name`` made anew (safe to run again): ``event`` (e.g. "AFTER DELETE ON payloads")
    runs ``statements``."""
    body = "\n    ".join(statements)
    return f"DROP TRIGGER IF EXISTS {name};\nCREATE TRIGGER {name} {event} BEGIN\n    {body}\nEND;\n"


# Migration 18: payloads counted and summed per collection of their memory, for stats. Summing
# them joined every memory: the planner walked an index of all of them to find none at
# 1,300,000 memories without payloads (0.4 s from a cold cache), and with a payload per memory
# it reads every payload's page. A memory's payload follows it when it moves between collections;
# a deleted memory takes its payload out (raw SQL with foreign keys off can leave the payload).
# Safe to run again (tests rewind user_version).
PAYLOAD_COUNTS_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS payload_counts (
    collection TEXT NOT NULL PRIMARY KEY,
    n          INTEGER NOT NULL,
    bytes      INTEGER NOT NULL
) WITHOUT ROWID;
"""
    + _trigger("payloads_ai_counts", "AFTER INSERT ON payloads", _payload_row("new"))
    + _trigger("payloads_ad_counts", "AFTER DELETE ON payloads", _payload_row("old", "-"))
    + _trigger("payloads_au_counts", "AFTER UPDATE OF memory_id, data ON payloads",
               _payload_row("old", "-"), _payload_row("new"))
    + _trigger("memories_au_payload_counts",
               "AFTER UPDATE OF collection ON memories WHEN old.collection IS NOT new.collection",
               _memory_payload("old", "-"), _memory_payload("new"))
    + _trigger("memories_ad_payload_counts", "AFTER DELETE ON memories", _memory_payload("old", "-"))
    + """DELETE FROM payload_counts;
INSERT INTO payload_counts (collection, n, bytes)
    SELECT m.collection, count(*), sum(length(p.data)) FROM payloads AS p CROSS JOIN memories AS m ON m.id = p.memory_id
    GROUP BY 1;
"""
)


def add_counts_sql(table: str, columns: tuple[str, ...]) -> str:
    """Add ``n`` to the count of one key: parameters are the key's ``columns``, then ``n``."""
    keys = ", ".join(columns)
    marks = ", ".join("?" for _ in columns)
    return (f"INSERT INTO {table} ({keys}, n) VALUES ({marks}, ?) "
            f"ON CONFLICT ({keys}) DO UPDATE SET n = n + excluded.n")


def collection_size(conn: apsw.Connection, collection: str) -> int:
    """The collection's memories of every type and status, from the counts the triggers keep."""
    return int(scalar(conn, "SELECT coalesce(sum(n), 0) FROM memory_counts WHERE collection = ?", (collection,)))
