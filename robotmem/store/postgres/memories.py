"""Writes and point reads of memories, payloads, embeddings and points, in PostgreSQL.

The twins of robotmem.store.memories / points / sessions for the PostgreSQL store.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from ...context import canonical_json
from ..memories import NewMemory, full_record
from ..points import extract_points
from ..rows import INSERTED_COLUMNS, MEMORY_COLUMNS
from .connection import PgConnection
from .sql import HITS_SELECT, effective_confidence_sql, tsvector_literal

__all__ = [
    "delete_embedding",
    "ensure_vector_index",
    "fetch_row",
    "find_duplicate",
    "flush_access_counts",
    "index_points",
    "insert_memory",
    "insert_payload",
    "insert_row",
    "iter_rows",
    "mark_forgotten",
    "put_embedding",
    "reinforce",
    "replace_content",
    "restart_ids",
]

_LIVE_FACT = "type = 'fact' AND status IN ('active', 'archived')"


_INSERT = (
    "INSERT INTO memories (collection, session_id, type, perception_type, content, search_text, search_tsv, "
    "context, content_hash, protected, confidence, reinforced_at, first_seen, last_seen, created_at, "
    "occurred_at, updated_at, embed) VALUES (?, ?, ?, ?, ?, ?, ?::tsvector, ?::jsonb, ?, ?, ?, ?, ?, ?, ?, ?, "
    f"?, ?) ON CONFLICT (collection, content_hash) WHERE {_LIVE_FACT} DO NOTHING RETURNING id"
)


def _values(m: NewMemory) -> tuple[Any, ...]:
    return (m.collection, m.session_id, m.type, m.perception_type, m.content, m.search_text,
            tsvector_literal(m.search_text), canonical_json(m.context), m.content_hash, m.protected, m.confidence,
            m.now, m.occurred_at, m.occurred_at, m.now, m.occurred_at, m.now, m.embed)


def insert_memories(conn: PgConnection, items: list[NewMemory]) -> list[int]:
    """Many perceptions in one pipelined statement; their points in another."""
    if not items:
        return []
    ids = [int(r[0]) for r in conn.executemany_returning(_INSERT, [_values(m) for m in items])]
    assert len(ids) == len(items)  # perceptions are never refused as duplicates
    points = [(memory_id, field, f"({x},{y})", z) for memory_id, m in zip(ids, items)
              for field, (x, y, z) in extract_points(m.context)]
    if points:
        conn.executemany("INSERT INTO spatial_points (memory_id, field, xy, z) VALUES (?, ?, ?::point, ?)", points)
    return ids


def put_embeddings(conn: PgConnection, rows: list[tuple[int, str, str, np.ndarray]]) -> None:
    for model_id, dim in {(r[2], int(r[3].shape[0])) for r in rows}:
        ensure_vector_index(conn, model_id, dim)
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


def ensure_vector_index(conn: PgConnection, model_id: str, dim: int) -> None:
    """One partial HNSW index per model (cosine), created with the model's first vector."""
    if model_id in conn.known_models:
        return
    if not conn.execute("SELECT 1 FROM vector_models WHERE model_id = ?", (model_id,)).fetchone():
        conn.execute("SELECT pg_advisory_xact_lock(?)", (0x726D7678,))
        if not conn.execute("SELECT 1 FROM vector_models WHERE model_id = ?", (model_id,)).fetchone():
            name = "embeddings_hnsw_" + hashlib.sha1(model_id.encode()).hexdigest()[:12]
            literal = "'" + model_id.replace("'", "''") + "'"
            conn.execute(
                f"CREATE INDEX IF NOT EXISTS {name} ON embeddings USING hnsw ((vector::vector({int(dim)})) "
                f"vector_cosine_ops) WHERE model_id = {literal}"
            )
            conn.execute("INSERT INTO vector_models (model_id, dim, index_name) VALUES (?, ?, ?)",
                         (model_id, dim, name))
    conn.known_models.add(model_id)  # an index only speeds search up: a stale entry costs nothing


def put_embedding(conn: PgConnection, memory_id: int, collection: str, model_id: str, vector: np.ndarray) -> None:
    vec = np.ascontiguousarray(vector, dtype=np.float32)
    ensure_vector_index(conn, model_id, int(vec.shape[0]))
    conn.execute(
        "INSERT INTO embeddings (memory_id, collection, model_id, dim, vector) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (memory_id) DO UPDATE SET model_id = excluded.model_id, dim = excluded.dim, "
        "vector = excluded.vector",
        (memory_id, collection, model_id, int(vec.shape[0]), vec),
    )


def delete_embedding(conn: PgConnection, memory_id: int) -> None:
    conn.execute("DELETE FROM embeddings WHERE memory_id = ?", (memory_id,))


def find_duplicate(conn: PgConnection, collection: str, content_hash: str) -> int | None:
    row = conn.execute(
        "SELECT id FROM memories WHERE collection = ? AND content_hash = ? AND status IN ('active', 'archived') "
        "ORDER BY id LIMIT 1",
        (collection, content_hash),
    ).fetchone()
    return None if row is None else int(row[0])


def reinforce(
    conn: PgConnection, memory_id: int, now: float, *, step: float, ceiling: float, half_life_s: float,
    evidence: int = 1,
) -> None:
    decayed, decay_params = effective_confidence_sql(now, half_life_s)
    conn.execute(
        f"UPDATE memories AS m SET confidence = least(?::float8, {decayed} + ?::float8), "
        "reinforced_at = ?, last_seen = greatest(last_seen, ?), evidence_count = evidence_count + ?, "
        "status = CASE status WHEN 'archived' THEN 'active' ELSE status END, updated_at = ? WHERE id = ?",
        (ceiling, *decay_params, step * evidence, now, now, evidence, now, memory_id),
    )


def fetch_row(conn: PgConnection, memory_id: int) -> tuple[Any, ...] | None:
    row = conn.execute(HITS_SELECT + " WHERE m.id = ?", (memory_id,)).fetchone()
    return None if row is None else tuple(row)


def fetch_rows(conn: PgConnection, memory_ids: list[int]) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute(HITS_SELECT + " WHERE m.id = ANY(?)", (memory_ids,))]


def mark_forgotten(conn: PgConnection, memory_id: int, reason: str, now: float) -> None:
    conn.execute(
        "UPDATE memories SET status = 'forgotten', forgotten_at = ?, forget_reason = ?, updated_at = ? WHERE id = ?",
        (now, reason, now, memory_id),
    )


def replace_content(
    conn: PgConnection, memory_id: int, *, content: str, search_text: str, context: dict[str, Any],
    content_hash: str, protected: bool, now: float,
) -> None:
    conn.execute(
        "UPDATE memories SET content = ?, search_text = ?, search_tsv = ?::tsvector, context = ?::jsonb, "
        "content_hash = ?, protected = ?, updated_at = ? WHERE id = ?",
        (content, search_text, tsvector_literal(search_text), canonical_json(context), content_hash, protected,
         now, memory_id),
    )
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
    """A whole exported memory; None when it would be a second live copy of a fact (the unique rule)."""
    columns = [c for c in INSERTED_COLUMNS if keep_id or c != "id"]
    values = []
    for c in columns:
        value = r.get(c, 1 if c == "embed" else None)
        if c in ("context", "absorbed"):
            value = json.dumps(value)
        elif c in ("protected", "embed"):
            value = bool(value)
        values.append(value)
    casts = {"context": "?::jsonb", "absorbed": "?::jsonb"}
    placeholders = ", ".join(casts.get(c, "?") for c in columns)
    row = conn.execute(
        f"INSERT INTO memories ({', '.join(columns)}, search_tsv) VALUES ({placeholders}, ?::tsvector) "
        f"ON CONFLICT (collection, content_hash) WHERE {_LIVE_FACT} DO NOTHING RETURNING id",
        [*values, tsvector_literal(r["search_text"])],
    ).fetchone()
    if row is None:
        return None
    index_points(conn, int(row[0]), r["context"], fresh=True)
    return int(row[0])


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
