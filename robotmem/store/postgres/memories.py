"""Writes and point reads of memories, payloads, embeddings and points, in PostgreSQL.

The twins of robotmem.store.memories / points / sessions for the PostgreSQL store.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

import numpy as np
import psycopg

from ...context import canonical_json
from ...errors import ConflictError
from ..memories import NewMemory, full_record
from ..pipeline import Later
from ..points import extract_points
from ..purge import PurgedPage, PurgeScope, page_ids
from ..rows import DUPLICATE_FACT_SQL, INSERTED_COLUMNS, MEMORY_COLUMNS, new_uid
from .connection import PgConnection
from .locks import INDEX_BUILDING, lock_index_build
from .sql import HITS_SELECT, effective_confidence_sql, sql_literal, tsvector_literal

__all__ = [
    "BULK_ROWS",
    "build_vector_index",
    "delete_embedding",
    "ensure_vector_index",
    "fetch_row",
    "find_duplicate",
    "flush_access_counts",
    "index_name",
    "index_points",
    "insert_memory",
    "insert_payload",
    "ids_by_uid",
    "insert_row",
    "iter_rows",
    "embeddings_owner",
    "lock_live_contents",
    "lock_memory",
    "may_build_indexes",
    "mark_forgotten",
    "put_embedding",
    "reinforce",
    "replace_content",
    "restart_ids",
    "vector_count",
    "vector_index_pairs",
]

_LIVE_FACT = "type = 'fact' AND status IN ('active', 'archived')"
#: Vectors of one (collection, model) in one batch from which a write counts as a bulk load.
BULK_ROWS: Final = 500
_BUILD_MEMORY = "512MB"


_INSERT = (
    "INSERT INTO memories (collection, session_id, type, perception_type, content, search_text, search_tsv, "
    "context, content_hash, protected, confidence, reinforced_at, first_seen, last_seen, created_at, "
    "occurred_at, updated_at, embed, uid) VALUES (?, ?, ?, ?, ?, ?, ?::tsvector, ?::jsonb, ?, ?, ?, ?, ?, ?, ?, "
    f"?, ?, ?, ?) ON CONFLICT (collection, content_hash) WHERE {_LIVE_FACT} DO NOTHING RETURNING id"
)


def _values(m: NewMemory) -> tuple[Any, ...]:
    return (m.collection, m.session_id, m.type, m.perception_type, m.content, m.search_text,
            tsvector_literal(m.search_text), m.context_json, m.content_hash, m.protected, m.confidence,
            m.now, m.occurred_at, m.occurred_at, m.now, m.occurred_at, m.now, m.embed, m.uid or new_uid())


def insert_memories(conn: PgConnection, items: list[NewMemory], *, later: Later | None = None) -> list[int]:
    """Many perceptions in one pipelined statement; their points in another. ``later`` is left
    empty: every statement here binds its rows from Python."""
    if not items:
        return []
    ids = [int(r[0]) for r in conn.executemany_returning(_INSERT, [_values(m) for m in items])]
    assert len(ids) == len(items)  # perceptions are never refused as duplicates
    points = [(memory_id, field, f"({x},{y})", z) for memory_id, m in zip(ids, items)
              for field, (x, y, z) in extract_points(m.context)]
    if points:
        conn.executemany("INSERT INTO spatial_points (memory_id, field, xy, z) VALUES (?, ?, ?::point, ?)", points)
    return ids


def put_embeddings(conn: PgConnection, rows: list[tuple[int, str, str, np.ndarray]], *, bulk: bool = False) -> None:
    """Many vectors in one pipelined statement. ``bulk`` (a copy that builds the indexes at its end),
    or a batch of at least BULK_ROWS vectors for a (collection, model) that has no index yet, leaves
    the pair's HNSW index to ``build_vector_indexes``: see ensure_vector_index."""
    if not rows:
        return
    groups: dict[tuple[str, str, int], int] = {}
    for r in rows:
        key = (r[1], r[2], int(r[3].shape[0]))
        groups[key] = groups.get(key, 0) + 1
    for (collection, model_id, dim), count in groups.items():
        ensure_vector_index(conn, collection, model_id, dim, bulk=bulk or count >= BULK_ROWS, batch=True)
    conn.executemany(
        "INSERT INTO embeddings (memory_id, collection, model_id, dim, vector) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (memory_id) DO UPDATE SET model_id = excluded.model_id, dim = excluded.dim, "
        "vector = excluded.vector",
        [(memory_id, collection, model_id, int(v.shape[0]), np.ascontiguousarray(v, dtype=np.float32))
         for memory_id, collection, model_id, v in rows],
    )


def insert_memory(conn: PgConnection, m: NewMemory) -> int | None:
    """Insert the row and its points; None when a live fact with the same text and context exists
    (the database's unique index decides, so concurrent learns of one insight store it once)."""
    row = conn.execute(_INSERT, _values(m)).fetchone()
    if row is None:
        return None
    memory_id = int(row[0])
    index_points(conn, memory_id, m.context, fresh=True)
    return memory_id


def insert_payload(conn: PgConnection, memory_id: int, blob: bytes, summary: dict[str, Any]) -> None:
    conn.execute(
        "INSERT INTO payloads (memory_id, data, summary) VALUES (?, ?, ?) "
        "ON CONFLICT (memory_id) DO UPDATE SET data = excluded.data, summary = excluded.summary",
        (memory_id, blob, json.dumps(summary)),
    )


def index_name(collection: str, model_id: str) -> str:
    return "embeddings_hnsw_" + hashlib.sha256(f"{collection}\0{model_id}".encode()).hexdigest()[:16]


def ensure_vector_index(conn: PgConnection, collection: str, model_id: str, dim: int, *, bulk: bool = False,
                       batch: bool = False) -> None:
    """The (collection, model)'s partial HNSW index exists before its vectors are written, except
    while it is left to be built: pgvector updates HNSW row by row (scripts/bench_pg_bulk.py, one
    run: 69 records/s with the index maintained, 236 records/s loading then building it), so a
    bulk load into a pair without an index leaves it unbuilt, and so do later batches; the next
    single write (``learn``, ``update``, one ``save_perception``: put_embedding), ``robotmem reindex``
    or the end of ``robotmem migrate`` builds it."""
    key = (collection, model_id)
    if key in conn.indexed:
        return
    row = conn.execute("SELECT ready FROM vector_indexes WHERE collection = ? AND model_id = ?", key).fetchone()
    if row is None or not row[0]:
        if bulk or (batch and row is not None) or not may_build_indexes(conn):
            conn.execute("INSERT INTO vector_indexes (collection, model_id, dim, ready) VALUES (?, ?, ?, false) "
                         "ON CONFLICT DO NOTHING", (collection, model_id, dim))
            return
        build_vector_index(conn, collection, model_id, dim)
    conn.indexed.add(key)  # an index only speeds search up: a stale entry costs nothing


def may_build_indexes(conn: PgConnection) -> bool:
    """Whether this role may create the HNSW indexes: only the owner of ``embeddings`` (or a member of
    its owner role) may. A role granted only SELECT/INSERT/UPDATE/DELETE, as a DBA gives robots, failed
    every first write into a new collection with "must be owner of table embeddings"; its writes now
    leave the index unbuilt, as a bulk load does, and recall scans that collection exactly until the
    owner runs ``robotmem reindex``."""
    row = conn.execute("SELECT pg_has_role(relowner, 'USAGE') FROM pg_class "
                       "WHERE oid = 'embeddings'::regclass").fetchone()
    return bool(row is not None and row[0])


def embeddings_owner(conn: PgConnection) -> str:
    row = conn.execute("SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'embeddings'::regclass").fetchone()
    return str(row[0]) if row is not None else "?"


def build_vector_index(conn: PgConnection, collection: str, model_id: str, dim: int, *,
                       rebuild: bool = False) -> bool:
    """Create the pair's index over the vectors already there (``rebuild``: drop it first); False when
    another writer had built it. Holds a lock per pair, so concurrent writers build it once."""
    lock_index_build(conn, collection, model_id)
    name = index_name(collection, model_id)
    row = conn.execute("SELECT ready AND live_only FROM vector_indexes WHERE collection = ? AND model_id = ?",
                       (collection, model_id)).fetchone()
    if row is not None and row[0] and not rebuild:
        return False
    # Named in the store's schema: unqualified, a store whose index of this name did not exist yet
    # dropped another store's, further along the search_path (the same pair has the same name there).
    (schema,) = conn.execute("SELECT current_schema()").fetchone() or ("public",)
    conn.execute(f"DROP INDEX IF EXISTS {_identifier(schema)}.{name}")
    # Memories no longer live before PostgreSQL migration 8 added the column (its triggers keep it since).
    conn.execute("UPDATE embeddings e SET searchable = false FROM memories m WHERE m.id = e.memory_id "
                 "AND e.collection = ? AND e.model_id = ? AND e.searchable AND m.status NOT IN ('active', 'archived')",
                 (collection, model_id))
    # The graph is built in memory when it fits (pgvector warns and goes on disk, slower, when not).
    conn.execute(f"SET LOCAL maintenance_work_mem = '{_BUILD_MEMORY}'")
    conn.execute(
        f"CREATE INDEX {name} ON embeddings USING hnsw ((vector::vector({int(dim)})) vector_cosine_ops) "
        f"WHERE collection = {sql_literal(collection)} AND model_id = {sql_literal(model_id)} AND searchable"
    )
    conn.execute("INSERT INTO vector_indexes (collection, model_id, dim, ready, live_only) VALUES (?, ?, ?, true, true) "
                 "ON CONFLICT (collection, model_id) DO UPDATE SET ready = true, live_only = true, dim = excluded.dim",
                 (collection, model_id, dim))
    return True


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def vector_index_pairs(conn: PgConnection, *, everything: bool, stale: bool = False) -> list[tuple[str, str, int]]:
    """(collection, model, dim) of the indexes still to build; ``stale``: and those to rebuild without
    superseded and forgotten vectors (built before PostgreSQL migration 8: only an explicit reindex
    rebuilds them, an import or a migrate must not stop the fleet for it); ``everything``: all."""
    where = "" if everything else " WHERE NOT (ready AND live_only)" if stale else " WHERE NOT ready"
    rows = conn.execute("SELECT collection, model_id, dim FROM vector_indexes" + where + " ORDER BY collection, model_id")
    return [(str(c), str(m), int(d)) for c, m, d in rows]


def vector_index_states(conn: PgConnection, collection: str | None) -> list[dict[str, Any]]:
    """Each (collection, model)'s HNSW index: built, or left unbuilt by a bulk load (recall then
    scans exactly), and whether a writer is building it now (it holds the pair's advisory lock)."""
    where, params = (" WHERE v.collection = ?", (collection,)) if collection is not None else ("", ())
    rows = conn.execute(
        f"SELECT v.collection, v.model_id, v.ready, v.live_only, {INDEX_BUILDING}, "
        "(SELECT count(*) FROM embeddings e WHERE e.collection = v.collection AND e.model_id = v.model_id) "
        f"FROM vector_indexes v{where} ORDER BY 1, 2", params)
    return [{"collection": str(c), "model_id": str(m), "kind": "hnsw", "vectors": int(n), "built": bool(ready),
             "stale": not (ready and live_only), "building": bool(busy)} for c, m, ready, live_only, busy, n in rows]


def vector_count(conn: PgConnection, collection: str, model_id: str) -> int:
    row = conn.execute("SELECT count(*) FROM embeddings WHERE collection = ? AND model_id = ?",
                       (collection, model_id)).fetchone()
    return 0 if row is None else int(row[0])


def put_embedding(conn: PgConnection, memory_id: int, collection: str, model_id: str, vector: np.ndarray) -> None:
    vec = np.ascontiguousarray(vector, dtype=np.float32)
    ensure_vector_index(conn, collection, model_id, int(vec.shape[0]))
    conn.execute(
        "INSERT INTO embeddings (memory_id, collection, model_id, dim, vector) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (memory_id) DO UPDATE SET model_id = excluded.model_id, dim = excluded.dim, "
        "vector = excluded.vector",
        (memory_id, collection, model_id, int(vec.shape[0]), vec),
    )


def lock_memory(conn: PgConnection, memory_id: int) -> None:
    conn.execute("SELECT 1 FROM memories WHERE id = ? FOR UPDATE", (memory_id,))


def lock_live_contents(conn: PgConnection, memory_ids: list[int]) -> dict[int, str]:
    # FOR SHARE: an update or forget of one of them waits for this transaction, and one that
    # committed first is seen (READ COMMITTED re-reads a locked row). Id order, as the other
    # writers that lock several memories (consolidation), so two of them queue, not deadlock.
    rows = conn.execute("SELECT id, content FROM memories WHERE id = ANY(?) AND status IN ('active', 'archived') "
                        "ORDER BY id FOR SHARE", (sorted(set(memory_ids)),))
    return {int(i): str(c) for i, c in rows}


def delete_embedding(conn: PgConnection, memory_id: int) -> None:
    conn.execute("DELETE FROM embeddings WHERE memory_id = ?", (memory_id,))


def purge_page(conn: PgConnection, scope: PurgeScope, limit: int) -> PurgedPage:
    """Delete the oldest ``limit`` memories ``scope`` takes (robotmem.store.purge), inside the
    caller's write (how many, and the last one's place). The rows that name a memory go first
    (foreign keys); its full-text vector is a column of its row."""
    ids, page = page_ids(conn, scope, limit)
    if ids:
        for table in ("spatial_points", "embeddings", "payloads", "import_links"):
            conn.execute(f"DELETE FROM {table} WHERE memory_id = ANY(?)", (ids,))
        conn.execute("DELETE FROM memories WHERE id = ANY(?)", (ids,))
    return page


def find_duplicate(conn: PgConnection, collection: str, content_hash: str) -> int | None:
    row = conn.execute(DUPLICATE_FACT_SQL, (collection, content_hash)).fetchone()
    return None if row is None else int(row[0])


def reinforce(
    conn: PgConnection, memory_id: int, now: float, *, step: float, ceiling: float, half_life_s: float,
    fresh: float, evidence: int = 1,
) -> None:
    """As robotmem.store.memories.reinforce: never below ``fresh`` + step, ``reinforced_at`` never moves back."""
    decayed, decay_params = effective_confidence_sql(now, half_life_s)
    conn.execute(
        f"UPDATE memories AS m SET confidence = least(?::float8, greatest({decayed}, ?::float8) + ?::float8), "
        "reinforced_at = greatest(reinforced_at, ?::float8), last_seen = greatest(last_seen, ?), "
        "evidence_count = evidence_count + ?, "
        "status = CASE status WHEN 'archived' THEN 'active' ELSE status END, updated_at = ? WHERE id = ?",
        (ceiling, *decay_params, fresh, step * evidence, now, now, evidence, now, memory_id),
    )


def fetch_row(conn: PgConnection, memory_id: int) -> tuple[Any, ...] | None:
    row = conn.execute(HITS_SELECT + " WHERE m.id = ?", (memory_id,)).fetchone()
    return None if row is None else tuple(row)


def fetch_rows(conn: PgConnection, memory_ids: list[int]) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute(HITS_SELECT + " WHERE m.id = ANY(?)", (memory_ids,))]


def fetch_payloads(conn: PgConnection, memory_ids: list[int]) -> dict[int, bytes | None]:
    """``{id: payload blob or None}`` for each id that names a memory; unknown ids are absent."""
    return {mid: None if blob is None else bytes(blob) for mid, blob in conn.execute(
        "SELECT m.id, p.data FROM memories m LEFT JOIN payloads p ON p.memory_id = m.id WHERE m.id = ANY(?)",
        (memory_ids,))}


def mark_forgotten(conn: PgConnection, memory_id: int, reason: str, now: float) -> None:
    conn.execute(
        "UPDATE memories SET status = 'forgotten', forgotten_at = ?, forget_reason = ?, updated_at = ? WHERE id = ?",
        (now, reason, now, memory_id),
    )


def replace_content(
    conn: PgConnection, memory_id: int, *, content: str, search_text: str, context: dict[str, Any],
    content_hash: str, protected: bool, now: float,
) -> None:
    try:
        conn.execute(
            "UPDATE memories SET content = ?, search_text = ?, search_tsv = ?::tsvector, context = ?::jsonb, "
            "content_hash = ?, protected = ?, updated_at = ? WHERE id = ?",
            (content, search_text, tsvector_literal(search_text), canonical_json(context), content_hash, protected,
             now, memory_id),
        )
    except psycopg.errors.UniqueViolation as exc:
        if getattr(exc.diag, "constraint_name", None) != "memories_one_live_fact":
            raise
        # The service checks this under its write transaction; this is the race in which another
        # session stored the same fact between that check and this statement. The transaction is
        # aborted and rolled back by the caller: nothing changed.
        raise ConflictError(
            f"new_content: another live fact with the same text and context was stored meanwhile; "
            f"memory {memory_id} was not changed", field="new_content",
        ) from exc
    index_points(conn, memory_id, context)


def flush_access_counts(conn: PgConnection, counts: dict[int, int], now: float) -> None:
    # Ascending ids: concurrent flushes lock rows in one order, so they queue instead of deadlocking.
    conn.executemany(
        "UPDATE memories SET access_count = access_count + ?, last_accessed = ? WHERE id = ?",
        [(counts[memory_id], now, memory_id) for memory_id in sorted(counts)],
    )


def index_points(conn: PgConnection, memory_id: int, context: dict[str, Any], *, fresh: bool = False) -> None:
    if not fresh:
        conn.execute("DELETE FROM spatial_points WHERE memory_id = ?", (memory_id,))
    rows = [(memory_id, field, f"({x},{y})", z) for field, (x, y, z) in extract_points(context)]
    if rows:
        conn.executemany("INSERT INTO spatial_points (memory_id, field, xy, z) VALUES (?, ?, ?::point, ?)", rows)


def insert_row(conn: PgConnection, r: dict[str, Any], *, keep_id: bool = False) -> int | None:
    """A whole exported memory; None when it would be a second live copy of a fact (the unique rule)
    or, for an import (not ``keep_id``), when its uid is stored already: another import of the same
    file stored it since this one looked (the insert waits for that one's commit, then does nothing).
    Its ``uid`` is kept (a new one when the record has none: an export written before uids)."""
    columns = [c for c in INSERTED_COLUMNS if keep_id or c != "id"]
    values = []
    for c in columns:
        value = r.get(c, 1 if c == "embed" else None)
        if c == "uid":
            value = value or new_uid()
        elif c in ("context", "absorbed"):
            value = json.dumps(value)
        elif c in ("protected", "embed"):
            value = bool(value)
        values.append(value)
    casts = {"context": "?::jsonb", "absorbed": "?::jsonb"}
    placeholders = ", ".join(casts.get(c, "?") for c in columns)
    # One ON CONFLICT names at most one unique index: an import's insert (new id) gives way on any
    # (a live fact's, the uid's); a copy's (migrate, ids kept) on the live fact's only, so a clash
    # of ids still fails loudly instead of passing for a merged duplicate.
    conflict = ("ON CONFLICT DO NOTHING" if not keep_id
                else f"ON CONFLICT (collection, content_hash) WHERE {_LIVE_FACT} DO NOTHING")
    row = conn.execute(
        f"INSERT INTO memories ({', '.join(columns)}, search_tsv) VALUES ({placeholders}, ?::tsvector) "
        f"{conflict} RETURNING id",
        [*values, tsvector_literal(r["search_text"])],
    ).fetchone()
    if row is None:
        return None
    index_points(conn, int(row[0]), r["context"], fresh=True)
    return int(row[0])


def ids_by_uid(conn: PgConnection, uids: list[str]) -> dict[str, int]:
    """``{uid: memory id}`` for each of ``uids`` a memory of the store has (one lookup of the uid index each)."""
    if not uids:
        return {}
    return {str(u): int(i) for u, i in conn.execute("SELECT uid, id FROM memories WHERE uid = ANY(?)", (uids,))}


def adopt_uid(conn: PgConnection, memory_id: int, provisional: str, uid: str) -> bool:
    """Store.adopt_uid. Besides a uid given to the row since it was read, another writer may have
    stored ``uid`` since the caller looked it up: the unique index refuses it, and the savepoint keeps
    the caller's other writes instead of aborting its transaction."""
    try:
        with conn.raw.transaction():
            conn.execute("UPDATE memories SET uid = ? WHERE id = ? AND uid = ?", (uid, memory_id, provisional))
    except psycopg.errors.UniqueViolation:
        return False
    return conn.changes() == 1


def iter_rows(conn: PgConnection, after_id: int, limit: int) -> list[dict[str, Any]]:
    casts = {"context": "m.context::text", "absorbed": "m.absorbed::text"}
    select = ", ".join(casts.get(c, f"m.{c}") for c in MEMORY_COLUMNS)
    rows = conn.execute(
        f"SELECT {select}, p.data, p.summary, e.model_id, e.vector FROM memories m "
        "LEFT JOIN payloads p ON p.memory_id = m.id LEFT JOIN embeddings e ON e.memory_id = m.id "
        "WHERE m.id > ? ORDER BY m.id LIMIT ?",
        (after_id, limit),
    ).fetchall()
    return [full_record(tuple(row)) for row in rows]


def restart_ids(conn: PgConnection) -> None:
    """After rows were copied with their ids: new memories continue after the largest."""
    conn.execute("SELECT setval(pg_get_serial_sequence('memories', 'id'), "
                 "greatest((SELECT coalesce(max(id), 0) FROM memories), 1))")
