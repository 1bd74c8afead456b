"""Hard deletion of old perceptions (``Memory.purge_perceptions``), a page of memories at a time.

Nothing else deletes a memory: forget, merging and archiving keep the row, so a store fed by a
robot grows without end (about 2.76 kB per perception with a MiniLM vector: 2.4 GB a day at
10 Hz). A purge removes every row of the memories it takes, in both stores, and keeps:

* facts, and every memory that is no perception;
* protected perceptions (``protected: true`` or a safety or constraint category: robotmem never
  merges or decays them, and a retention rule must not take them either);
* an episode's summary record (its last active procedural perception, as
  robotmem.store.sessions.session_overviews finds it), so an episode keeps its summary;
* any memory another memory names as its ``superseded_by``, and any memory that names one
  (merged ones, listed in their target's ``absorbed``): consolidation merges facts only, but an
  import may bring such links, and a deleted target would leave a dangling id;
* sessions rows (their timeline just has fewer records).

A page selects the oldest ``PAGE_IDS`` memories that qualify and deletes them in one write
transaction, so the write lock is held briefly and a process killed between pages leaves a
consistent store: every page is whole or absent, and running the purge again takes what is left.
Each page starts after the last memory the one before took (``PurgeScope.after``): the rows a
purge keeps (facts, summaries, protected ones) stay in the time index before it, and without the
cursor every page walked all of them again under the write lock.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from .sessions import SUMMARY_RECORD

__all__ = ["PAGE_IDS", "PurgeScope", "PurgedPage", "count_purgeable", "count_sql", "delete_sqlite_memories", "has_collection",
           "page_ids", "page_sql", "purge_sqlite_page"]

#: Memories deleted per write transaction (a module attribute: tests make it small).
PAGE_IDS = 5000


class PurgeScope(NamedTuple):
    """Perceptions of ``collection`` that occurred before ``before`` (epoch seconds), of
    ``session_id`` only when it is given, and after ``after`` (occurred_at, id) when given."""

    collection: str
    before: float
    session_id: str | None = None
    after: tuple[float, int] | None = None


class PurgedPage(NamedTuple):
    """How many memories a page took, and the (occurred_at, id) of its last (None: it took none)."""

    taken: int
    last: tuple[float, int] | None


# The same SQL in both stores. The summary test is the negation of session_overviews' rule (no
# later active procedural perception in the episode), read from the memories_summaries index.
_QUALIFIES = """FROM memories m
WHERE m.collection = ? AND m.occurred_at < ? AND m.type = 'perception'{session}{after}
  AND NOT m.protected AND m.superseded_by IS NULL
  AND NOT EXISTS (SELECT 1 FROM memories r WHERE r.superseded_by = m.id)
  AND NOT ({summary_m} AND m.session_id IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM memories s WHERE s.session_id = m.session_id AND {summary_s}
                           AND (s.occurred_at > m.occurred_at OR (s.occurred_at = m.occurred_at AND s.id > m.id))))"""


def _where(scope: PurgeScope) -> tuple[str, list[Any]]:
    params: list[Any] = [scope.collection, scope.before]
    session = after = ""
    if scope.session_id is not None:
        session = " AND m.session_id = ?"
        params.append(scope.session_id)
    if scope.after is not None:
        # both planners start their index range at the pair's first value; the id orders ties
        after = " AND (m.occurred_at, m.id) > (?, ?)"
        params += [*scope.after]
    return _QUALIFIES.format(session=session, after=after, summary_m=SUMMARY_RECORD.format(a="m."),
                             summary_s=SUMMARY_RECORD.format(a="s.")), params


def page_sql(scope: PurgeScope, limit: int) -> tuple[str, list[Any]]:
    """The ids and times of the oldest ``limit`` memories the purge takes."""
    where, params = _where(scope)
    return f"SELECT m.id, m.occurred_at {where} ORDER BY m.occurred_at, m.id LIMIT ?", [*params, limit]


def count_sql(scope: PurgeScope) -> tuple[str, list[Any]]:
    """How many memories the purge would take (``--dry-run``)."""
    where, params = _where(scope)
    return f"SELECT count(*) {where}", params


def page_ids(conn: Any, scope: PurgeScope, limit: int) -> tuple[list[int], PurgedPage]:
    """The ids of the next page, and what it will have taken once they are deleted."""
    query, params = page_sql(scope, limit)
    rows = [(int(memory_id), float(at)) for memory_id, at in conn.execute(query, params).fetchall()]
    return [i for i, _ in rows], PurgedPage(len(rows), (rows[-1][1], rows[-1][0]) if rows else None)


def count_purgeable(conn: Any, scope: PurgeScope) -> int:
    query, params = count_sql(scope)
    return int(conn.execute(query, params).fetchone()[0])


def purge_sqlite_page(conn: Any, scope: PurgeScope, limit: int) -> PurgedPage:
    """Delete the oldest ``limit`` memories ``scope`` takes, inside the caller's write."""
    ids, page = page_ids(conn, scope, limit)
    if ids:
        delete_sqlite_memories(conn, ids)
    return page


def delete_sqlite_memories(conn: Any, memory_ids: list[int]) -> None:
    """Every row of the memories in SQLite. Their points first (no trigger keeps the R*Trees);
    triggers on the rest take out the full-text entries of searchable ones, the context leaves,
    the counts and log each deleted vector and memory to change_log, so in-process vector
    mirrors, leaf columns and snapshot overlays drop them."""
    from .points import delete_points

    delete_points(conn, memory_ids)
    ids = json.dumps(memory_ids)
    for table in ("embeddings", "payloads", "import_links"):
        conn.execute(f"DELETE FROM {table} WHERE memory_id IN (SELECT value FROM json_each(?))", (ids,))
    conn.execute("DELETE FROM memories WHERE id IN (SELECT value FROM json_each(?))", (ids,))


def has_collection(conn: Any, collection: str) -> bool:
    """Whether any memory is in ``collection`` (a purge of one no memory is in names a wrong one)."""
    return conn.execute("SELECT 1 FROM memories WHERE collection = ? LIMIT 1", (collection,)).fetchone() is not None
