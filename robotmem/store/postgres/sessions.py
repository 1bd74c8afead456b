"""Sessions (episodes) and store statistics, in PostgreSQL (twins of robotmem.store.sessions / stats)."""

from __future__ import annotations

import json
from typing import Any

from ..sessions import SessionCursor, _export_form, session_from_row, sessions_where
from .connection import PgConnection
from .migrations import SCHEMA_VERSION

__all__ = ["close_session", "get_session", "insert_session", "list_sessions", "lock_session", "session_counts", "store_stats"]

_COLUMNS = "id, collection, context::text, started_at, ended_at, outcome_score, summary"


def insert_session(conn: PgConnection, session_id: str, collection: str, context_json: str, now: float) -> bool:
    # The conflict waits for a concurrent insert of this id to commit or roll back, so the answer
    # is the database's, not what a read earlier in this transaction saw.
    row = conn.execute(
        "INSERT INTO sessions (id, collection, context, started_at) VALUES (?, ?, ?::jsonb, ?) "
        "ON CONFLICT (id) DO NOTHING RETURNING id",
        (session_id, collection, context_json, now),
    ).fetchone()
    return row is not None


def lock_session(conn: PgConnection, session_id: str) -> None:
    conn.execute("SELECT 1 FROM sessions WHERE id = ? FOR UPDATE", (session_id,))


def get_session(conn: PgConnection, session_id: str) -> dict[str, Any] | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return None if row is None else session_from_row(tuple(row))


def list_sessions(conn: PgConnection, collection: str | None, status: str | None, limit: int | None,
                  after: SessionCursor | None = None, robot: str | None = None) -> list[dict[str, Any]]:
    clause, params = sessions_where(collection, status, after, robot, "postgresql")
    if limit is not None:  # None: every session
        clause, params = f"{clause} ORDER BY started_at DESC, id LIMIT ?", [*params, limit]
    else:
        clause += " ORDER BY started_at DESC, id"
    rows = conn.execute(f"SELECT {_COLUMNS} FROM sessions {clause}", params)
    return [session_from_row(tuple(r)) for r in rows]


def close_session(conn: PgConnection, session_id: str, now: float, score: float | None,
                  summary: dict[str, Any]) -> None:
    conn.execute(
        "UPDATE sessions SET ended_at = ?, outcome_score = ?, summary = ? WHERE id = ?",
        (now, score, json.dumps(summary), session_id),
    )


def session_counts(conn: PgConnection, session_id: str) -> tuple[int, int]:
    row = conn.execute(
        "SELECT count(*) FILTER (WHERE type = 'fact'), count(*) FILTER (WHERE type = 'perception') FROM memories "
        "WHERE session_id = ? AND status IN ('active', 'archived', 'superseded')",
        (session_id,),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def store_stats(conn: PgConnection, collection: str | None) -> dict[str, Any]:
    where, params = ("WHERE collection = ?", [collection]) if collection is not None else ("", [])
    by_collection: dict[str, dict[str, Any]] = {}
    for coll, kind, status, count in conn.execute(
        f"SELECT collection, type, status, count(*) FROM memories {where} GROUP BY 1, 2, 3", params
    ):
        entry = by_collection.setdefault(coll, {"facts": 0, "perceptions": 0, "by_status": {}})
        if status in ("active", "archived"):
            entry["facts" if kind == "fact" else "perceptions"] += count
        entry["by_status"][status] = entry["by_status"].get(status, 0) + count
    for coll, open_count, ended_count in conn.execute(
        f"SELECT collection, count(*) FILTER (WHERE ended_at IS NULL), count(*) FILTER (WHERE ended_at IS NOT NULL) "
        f"FROM sessions {where} GROUP BY 1",
        params,
    ):
        entry = by_collection.setdefault(coll, {"facts": 0, "perceptions": 0, "by_status": {}})
        entry["sessions"] = {"open": open_count, "ended": ended_count}
    models = dict(conn.execute(f"SELECT model_id, count(*) FROM embeddings {where} GROUP BY 1", params).fetchall())
    payload = conn.execute(
        "SELECT coalesce(sum(length(p.data)), 0) FROM payloads p JOIN memories m ON m.id = p.memory_id "
        + where.replace("collection", "m.collection"),
        params,
    ).fetchone()
    size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    totals = {
        "facts": sum(e["facts"] for e in by_collection.values()),
        "perceptions": sum(e["perceptions"] for e in by_collection.values()),
        "sessions": sum(sum((e.get("sessions") or {}).values()) for e in by_collection.values()),
    }
    return {
        "memories": totals["facts"] + totals["perceptions"],
        **totals,
        "collections": by_collection,
        "embeddings": models,
        "payload_bytes": int(payload[0]) if payload else 0,
        "file_bytes": int(size[0]) if size else 0,
        "schema_version": SCHEMA_VERSION,
    }


def all_sessions(conn: PgConnection) -> list[dict[str, Any]]:
    return [_export_form(session_from_row(tuple(r))) for r in conn.execute(
        f"SELECT {_COLUMNS} FROM sessions ORDER BY started_at, id")]


def insert_session_row(conn: PgConnection, r: dict[str, Any]) -> bool:
    row = conn.execute(
        "INSERT INTO sessions (id, collection, context, started_at, ended_at, outcome_score, summary) "
        "VALUES (?, ?, ?::jsonb, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING id",
        (r["id"], r["collection"], json.dumps(r["context"]), r["started_at"], r["ended_at"],
         r["outcome_score"], json.dumps(r["summary"]) if r["summary"] is not None else None),
    ).fetchone()
    return row is not None
