"""Writes and point reads of memories, payloads and embeddings."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import apsw
import numpy as np

from ..context import canonical_json, load_stored_json
from ..payload import summary_from_json
from .decay import effective_confidence_sql
from .deferred import insert_deferring_indexes, insert_new_embeddings
from .pipeline import Later
from .points import index_new_points, index_points
from .rows import DUPLICATE_FACT_SQL, INSERTED_COLUMNS, MEMORY_COLUMNS, hits_sql, new_uid

__all__ = [
    "NewMemory",
    "fetch_row",
    "find_duplicate",
    "flush_access_counts",
    "insert_memories",
    "insert_memory",
    "insert_payload",
    "ids_by_uid",
    "insert_row",
    "iter_rows",
    "lock_live_contents",
    "mark_forgotten",
    "put_embedding",
    "put_embeddings",
    "reinforce",
    "replace_content",
]


# Not frozen: a frozen dataclass sets each field through object.__setattr__, 3.4 us per row
# against 0.5 us, paid for every record of a bulk insert. Built by the service, read by a backend.
@dataclass(slots=True)
class NewMemory:
    collection: str
    session_id: str | None
    type: str
    perception_type: str | None
    content: str
    search_text: str
    context: dict[str, Any]
    content_hash: str
    protected: bool
    confidence: float
    now: float
    occurred_at: float
    embed: bool = True
    #: ``canonical_json(context)``; filled in when not given (callers that validated the context have it).
    context_json: str = field(default="", compare=False)
    #: The memory's identity across stores; empty: each insert gives the row a new one (rows.new_uid).
    uid: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.context_json:
            self.context_json = canonical_json(self.context)


_INSERT = (
    "INSERT INTO memories (collection, session_id, type, perception_type, content, search_text, context, "
    "content_hash, protected, confidence, reinforced_at, first_seen, last_seen, created_at, occurred_at, "
    "updated_at, embed, uid) VALUES (?, ?, ?, ?, ?, ?, jsonb(?), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "RETURNING id, collection, type, status"
)


def _values(m: NewMemory) -> tuple[Any, ...]:
    return (m.collection, m.session_id, m.type, m.perception_type, m.content, m.search_text, m.context_json,
            m.content_hash, int(m.protected), m.confidence, m.now, m.occurred_at, m.occurred_at, m.now,
            m.occurred_at, m.now, int(m.embed), m.uid or new_uid())


def insert_memory(conn: apsw.Connection, m: NewMemory) -> int:
    """Insert the row, its full-text entry (trigger) and its points (spatial index)."""
    return insert_memories(conn, [m])[0]


def insert_memories(conn: apsw.Connection, items: list[NewMemory], *, later: Later | None = None) -> list[int]:
    """Many rows in one statement (ids in order: RETURNING yields one per row), then all their points.
    ``later``: statements of the batch that need no Python are appended to it (robotmem.store.pipeline)."""
    if not items:
        return []
    values = [_values(m) for m in items]
    if len(items) == 1:
        ids = [int(row[0]) for row in conn.execute(_INSERT, values[0])]
    else:
        ids = insert_deferring_indexes(conn, lambda: [tuple(row) for row in conn.executemany(_INSERT, values)],
                                       later)
    index_new_points(conn, list(zip(ids, (m.context for m in items))))
    return ids


def insert_payload(conn: apsw.Connection, memory_id: int, blob: bytes, summary: dict[str, Any]) -> None:
    # An upsert, not INSERT OR REPLACE: a replaced row fires no delete trigger (without recursive
    # triggers), and the payload counts would count it twice.
    conn.execute(
        "INSERT INTO payloads (memory_id, data, summary) VALUES (?, ?, ?) "
        "ON CONFLICT (memory_id) DO UPDATE SET data = excluded.data, summary = excluded.summary",
        (memory_id, blob, json.dumps(summary)),
    )


def put_embedding(conn: apsw.Connection, memory_id: int, collection: str, model_id: str, vector: np.ndarray) -> None:
    put_embeddings(conn, [(memory_id, collection, model_id, vector)])


def put_embeddings(conn: apsw.Connection, rows: list[tuple[int, str, str, np.ndarray]], *,
                   bulk: bool = False) -> None:
    """Insert or replace vectors: those of memories without one in one bulk insert, the rest in one
    statement. ``bulk`` changes nothing here: SQLite's vector index is the search layer's, built apart."""
    values = []
    for memory_id, collection, model_id, vector in rows:
        vec = np.ascontiguousarray(vector, dtype=np.float32)
        values.append((memory_id, collection, model_id, int(vec.shape[0]), vec.tobytes()))
    if len(values) > 1:
        new, values = _split_new(conn, values)
        insert_new_embeddings(conn, new)
    if values:
        conn.executemany(
            "INSERT INTO embeddings (memory_id, collection, model_id, dim, vector) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(memory_id) DO UPDATE SET model_id = excluded.model_id, dim = excluded.dim, "
            "vector = excluded.vector",
            values,
        )


def _split_new(conn: apsw.Connection, values: list[tuple[Any, ...]]) -> tuple[list[tuple[Any, ...]],
                                                                            list[tuple[Any, ...]]]:
    """(first rows of memories without a vector, the rest in order): inserting the first and then
    upserting the rest leaves what upserting all in order would."""
    have = {int(row[0]) for row in conn.execute(
        "SELECT memory_id FROM embeddings WHERE memory_id IN (SELECT value FROM json_each(?))",
        (json.dumps([v[0] for v in values]),))}
    new: list[tuple[Any, ...]] = []
    rest: list[tuple[Any, ...]] = []
    for v in values:
        (rest if v[0] in have else new).append(v)
        have.add(v[0])
    return new, rest


def lock_live_contents(conn: apsw.Connection, memory_ids: list[int]) -> dict[int, str]:
    """``{id: content}`` of those of the memories that are active or archived. Nothing to lock: the
    caller's write transaction (BEGIN IMMEDIATE) keeps every other writer out until it ends."""
    return {int(i): str(c) for i, c in conn.execute(
        "SELECT id, content FROM memories WHERE id IN (SELECT value FROM json_each(?)) "
        "AND status IN ('active', 'archived')", (json.dumps(memory_ids),))}


def find_duplicate(conn: apsw.Connection, collection: str, content_hash: str) -> int | None:
    row = conn.execute(DUPLICATE_FACT_SQL, (collection, content_hash)).fetchone()
    return None if row is None else int(row[0])


def reinforce(
    conn: apsw.Connection, memory_id: int, now: float, *, step: float, ceiling: float, half_life_s: float,
    fresh: float, evidence: int = 1,
) -> None:
    """Repeated evidence: ``min(ceiling, max(decayed to now, fresh) + step * evidence)``
    (store.decay.reinforced_confidence); the clock restarts at ``now`` but never moves back
    (a clock behind the row's ``reinforced_at`` leaves it, and does not decay the row)."""
    decayed, decay_params = effective_confidence_sql(now, half_life_s)
    conn.execute(
        f"UPDATE memories AS m SET confidence = min(?, max({decayed}, ?) + ?), "
        "reinforced_at = max(reinforced_at, ?), last_seen = max(last_seen, ?), evidence_count = evidence_count + ?, "
        "status = CASE status WHEN 'archived' THEN 'active' ELSE status END, updated_at = ? WHERE id = ?",
        (ceiling, *decay_params, fresh, step * evidence, now, now, evidence, now, memory_id),
    )


def fetch_row(conn: apsw.Connection, memory_id: int) -> tuple[Any, ...] | None:
    q, p = hits_sql(json.dumps([memory_id]))
    rows = conn.execute(q, p).fetchall()
    return rows[0] if rows else None


def fetch_payloads(conn: apsw.Connection, memory_ids: list[int]) -> dict[int, bytes | None]:
    """``{id: payload blob or None}`` for each id that names a memory; unknown ids are absent."""
    return {mid: None if blob is None else bytes(blob) for mid, blob in conn.execute(
        "SELECT m.id, p.data FROM memories m LEFT JOIN payloads p ON p.memory_id = m.id "
        "WHERE m.id IN (SELECT value FROM json_each(?))", (json.dumps(memory_ids),))}


def mark_forgotten(conn: apsw.Connection, memory_id: int, reason: str, now: float) -> None:
    conn.execute(
        "UPDATE memories SET status = 'forgotten', forgotten_at = ?, forget_reason = ?, updated_at = ? WHERE id = ?",
        (now, reason, now, memory_id),
    )


def replace_content(
    conn: apsw.Connection, memory_id: int, *, content: str, search_text: str, context: dict[str, Any],
    content_hash: str, protected: bool, now: float,
) -> None:
    conn.execute(
        "UPDATE memories SET content = ?, search_text = ?, context = jsonb(?), content_hash = ?, protected = ?, "
        "updated_at = ? WHERE id = ?",
        (content, search_text, canonical_json(context), content_hash, int(protected), now, memory_id),
    )
    index_points(conn, memory_id, context)


def flush_access_counts(conn: apsw.Connection, counts: dict[int, int], now: float) -> None:
    conn.executemany(
        "UPDATE memories SET access_count = access_count + ?, last_accessed = ? WHERE id = ?",
        [(count, now, memory_id) for memory_id, count in counts.items()],
    )


def insert_row(conn: apsw.Connection, r: dict[str, Any], *, keep_id: bool = False) -> int:
    """A whole memory row as exported (context/absorbed as JSON values); a new id unless ``keep_id``.
    Its ``uid`` is kept (a new one when the record has none: an export written before uids)."""
    columns = [c for c in INSERTED_COLUMNS if keep_id or c != "id"]
    values = [_row_value(r, c) for c in columns]
    placeholders = ", ".join("jsonb(?)" if c == "context" else "?" for c in columns)
    conn.execute(f"INSERT INTO memories ({', '.join(columns)}) VALUES ({placeholders})", values)
    new_id = int(conn.last_insert_rowid())
    index_new_points(conn, [(new_id, r["context"])])
    return new_id


def _row_value(r: dict[str, Any], column: str) -> Any:
    if column in ("context", "absorbed"):
        return json.dumps(r[column])
    if column == "uid":
        return r.get("uid") or new_uid()
    return r.get(column, 1 if column == "embed" else None)


def ids_by_uid(conn: apsw.Connection, uids: list[str]) -> dict[str, int]:
    """``{uid: memory id}`` for each of ``uids`` a memory of the store has (one lookup of the uid index each)."""
    if not uids:
        return {}
    return {str(u): int(i) for u, i in conn.execute(
        "SELECT uid, id FROM memories WHERE uid IN (SELECT value FROM json_each(?))", (json.dumps(uids),))}


def adopt_uid(conn: apsw.Connection, memory_id: int, provisional: str, uid: str) -> bool:
    """Store.adopt_uid. Another writer may have given the row a uid since it was read (between
    import batches): the update then finds no such row. No other writer can store ``uid`` meanwhile:
    the batch holds SQLite's only write lock."""
    conn.execute("UPDATE memories SET uid = ? WHERE id = ? AND uid = ?", (uid, memory_id, provisional))
    return bool(conn.changes() == 1)


def iter_rows(conn: apsw.Connection, after_id: int, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` whole memories with id > ``after_id`` in id order, with payload and vector."""
    select = ", ".join("json(m.context)" if c == "context" else f"m.{c}" for c in MEMORY_COLUMNS)
    rows = conn.execute(
        f"SELECT {select}, p.data, p.summary, e.model_id, e.vector FROM memories m "
        "LEFT JOIN payloads p ON p.memory_id = m.id LEFT JOIN embeddings e ON e.memory_id = m.id "
        "WHERE m.id > ? ORDER BY m.id LIMIT ?",
        (after_id, limit),
    ).fetchall()
    return [full_record(row) for row in rows]


def full_record(row: tuple[Any, ...]) -> dict[str, Any]:
    """A row of MEMORY_COLUMNS + payload data, payload summary, model id, vector, as plain values."""
    record = dict(zip(MEMORY_COLUMNS, row[: len(MEMORY_COLUMNS)]))
    data, summary, model_id, vector = row[len(MEMORY_COLUMNS):]
    record["context"] = load_stored_json(record["context"])
    record["absorbed"] = json.loads(record["absorbed"])
    record["protected"] = int(record["protected"])
    record["embed"] = int(record["embed"])
    record["payload"] = None if data is None else bytes(data)
    record["payload_summary"] = summary_from_json(summary) if summary else None
    record["embedding"] = None if vector is None else (model_id, _vector_bytes(vector))
    return record


def _vector_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if hasattr(value, "to_numpy"):  # pgvector.Vector
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32).tobytes()
