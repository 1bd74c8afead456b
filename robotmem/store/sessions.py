"""Sessions (episodes): rows and their summaries."""

from __future__ import annotations

import json
from typing import Any

import apsw

from ..context import load_stored_json, without_lone_surrogates
from .connection import one_row

__all__ = ["all_sessions", "close_session", "get_session", "insert_session", "insert_session_row", "list_sessions", "session_counts", "session_from_row",
           "session_overviews"]

_COLUMNS = "id, collection, json(context), started_at, ended_at, outcome_score, summary"


def session_from_row(row: tuple[Any, ...]) -> dict[str, Any]:
    """A session row (id, collection, context JSON, started, ended, score, summary JSON) as returned to callers."""
    sid, collection, context, started, ended, score, summary = row
    return {
        "session_id": sid,
        "collection": collection,
        "context": load_stored_json(context) if context else {},
        "started_at": started,
        "ended_at": ended,
        "outcome_score": score,
        "status": "open" if ended is None else "ended",
        "summary": _stored_summary(summary) if summary else None,
    }


def _stored_summary(text: str) -> Any:
    """A session's stored summary. Imports before summaries were checked (import_checks.check_session)
    stored one as given: a lone surrogate in it (kept as the escape ``\\ud800``) made every reader
    that writes UTF-8 fail (export, ``session list --json``, and the MCP server, which exited on
    it), so it is read as U+FFFD: one bad value must not take down the readers of every session."""
    summary = load_stored_json(text)
    return _replace_lone_surrogates(summary) if "\\ud" in text or "\\uD" in text else summary


def _replace_lone_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return without_lone_surrogates(value)
    if isinstance(value, dict):
        return {_replace_lone_surrogates(k): _replace_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_lone_surrogates(v) for v in value]
    return value


def insert_session(conn: apsw.Connection, session_id: str, collection: str, context_json: str, now: float) -> bool:
    """Whether it inserted the session: False when one with that id exists (nothing written)."""
    row = conn.execute(
        "INSERT INTO sessions (id, collection, context, started_at) VALUES (?, ?, jsonb(?), ?) "
        "ON CONFLICT (id) DO NOTHING RETURNING id",
        (session_id, collection, context_json, now),
    ).fetchone()
    return row is not None


def get_session(conn: apsw.Connection, session_id: str) -> dict[str, Any] | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return None if row is None else session_from_row(row)


#: Where a page of a session listing ended: its last session's (started_at, id).
SessionCursor = tuple[float, str]


#: A session's robot id is ? (its context's robot.id, a JSON string: each store writes a number
#: or a boolean as text its own way), per dialect.
_ROBOT_SQL = {"sqlite": "(json_type(context, '$.robot.id') = 'text' AND context ->> '$.robot.id' = ?)",
              "postgresql": "(jsonb_typeof(context #> '{robot,id}') = 'string' AND context #>> '{robot,id}' = ?)"}


def sessions_where(collection: str | None, status: str | None, after: SessionCursor | None = None,
                   robot: str | None = None, dialect: str = "sqlite") -> tuple[str, list[Any]]:
    """The WHERE clause (``?`` placeholders, both stores) of a session listing; ``after``: only
    the sessions that come after that one in the listing's order (started_at DESC, id), so a
    page goes on where the one before ended however many sessions started meanwhile; ``robot``:
    only those whose context's ``robot.id`` is that text."""
    where: list[str] = []
    params: list[Any] = []
    if after is not None:
        where.append("(started_at < ? OR (started_at = ? AND id > ?))")
        params.extend((after[0], after[0], after[1]))
    if robot is not None:
        where.append(_ROBOT_SQL[dialect])
        params.append(robot)
    if collection is not None:
        where.append("collection = ?")
        params.append(collection)
    if status == "open":
        where.append("ended_at IS NULL")
    elif status == "ended":
        where.append("ended_at IS NOT NULL")
    return ("WHERE " + " AND ".join(where)) if where else "", params


def list_sessions(
    conn: apsw.Connection, collection: str | None, status: str | None, limit: int | None,
    after: SessionCursor | None = None, robot: str | None = None,
) -> list[dict[str, Any]]:
    clause, params = sessions_where(collection, status, after, robot, "sqlite")
    if limit is not None:  # None: every session
        clause, params = f"{clause} ORDER BY started_at DESC, id LIMIT ?", [*params, limit]
    else:
        clause += " ORDER BY started_at DESC, id"
    rows = conn.execute(f"SELECT {_COLUMNS} FROM sessions {clause}", params)
    return [session_from_row(r) for r in rows]


def close_session(
    conn: apsw.Connection, session_id: str, now: float, score: float | None, summary: dict[str, Any]
) -> None:
    conn.execute(
        "UPDATE sessions SET ended_at = ?, outcome_score = ?, summary = ? WHERE id = ?",
        (now, score, json.dumps(summary), session_id),
    )


def session_counts(conn: apsw.Connection, session_id: str) -> tuple[int, int]:
    """(facts, perceptions) written in the session that are still searchable or archived."""
    row = one_row(
        conn,
        "SELECT coalesce(sum(type = 'fact'), 0), coalesce(sum(type = 'perception'), 0) FROM memories "
        "WHERE session_id = ? AND status IN ('active', 'archived', 'superseded')",
        (session_id,),
    )
    return int(row[0]), int(row[1])


#: Session ids per statement of session_overviews: far below either database's limit of parameters.
_IDS_PER_STATEMENT = 500

# Per session: its active facts and perceptions.
_ACTIVE_COUNTS = (
    "SELECT session_id, sum(CASE WHEN type = 'fact' THEN 1 ELSE 0 END), "
    "sum(CASE WHEN type = 'perception' THEN 1 ELSE 0 END) FROM memories "
    "WHERE session_id IN ({marks}) AND status = 'active' GROUP BY session_id"
)
# Per session: its summary, the last active procedural perception in time order (the
# session_timeline order, reversed: what a replay or a bridge writes when an episode ends).
#: What a summary can be, ``{a}`` the table's alias with its dot ("" without one); the partial index
#: memories_summaries (migrations: SQLite 23, PostgreSQL 12) spells the same, as a purge's keep does.
SUMMARY_RECORD = "{a}type = 'perception' AND {a}perception_type = 'procedural' AND {a}status = 'active'"
_SUMMARY_IDS = (
    "SELECT session_id, id FROM (SELECT session_id, id, row_number() OVER "
    "(PARTITION BY session_id ORDER BY occurred_at DESC, id DESC) AS k FROM memories "
    "WHERE session_id IN ({marks}) AND " + SUMMARY_RECORD.format(a="") + ") AS s WHERE k = 1"
)


def session_overviews(conn: Any, session_ids: list[str], counts: bool = True) -> dict[str, dict[str, Any]]:
    """``{session_id: {"facts", "perceptions", "summary_id"}}``: live counts of active memories
    and the summary's id (None without one), from aggregates instead of whole records, so a list
    of episodes does not read every record of each. The counts read each memory's type and
    status; ``counts=False`` leaves them out (None) and reads the summaries' index entries only
    (memories_summaries: SQLite migration 23, PostgreSQL 12). The same SQL in both stores
    (window functions: SQLite 3.25+, PostgreSQL)."""
    zero = 0 if counts else None
    found: dict[str, dict[str, Any]] = {sid: {"facts": zero, "perceptions": zero, "summary_id": None}
                                        for sid in session_ids}
    ids = list(found)
    for first in range(0, len(ids), _IDS_PER_STATEMENT):
        batch = ids[first:first + _IDS_PER_STATEMENT]
        marks = ", ".join("?" for _ in batch)
        for sid, facts, perceptions in conn.execute(_ACTIVE_COUNTS.format(marks=marks), batch) if counts else ():
            found[sid].update(facts=int(facts), perceptions=int(perceptions))
        for sid, memory_id in conn.execute(_SUMMARY_IDS.format(marks=marks), batch):
            found[sid]["summary_id"] = int(memory_id)
    return found


def all_sessions(conn: apsw.Connection) -> list[dict[str, Any]]:
    """Every session as exported: id, collection, context, times, outcome and summary."""
    return [_export_form(session_from_row(tuple(r))) for r in conn.execute(
        f"SELECT {_COLUMNS} FROM sessions ORDER BY started_at, id")]


def _export_form(session: dict[str, Any]) -> dict[str, Any]:
    return {"id": session["session_id"], "collection": session["collection"], "context": session["context"],
            "started_at": session["started_at"], "ended_at": session["ended_at"],
            "outcome_score": session["outcome_score"], "summary": session["summary"]}


def insert_session_row(conn: apsw.Connection, r: dict[str, Any]) -> bool:
    """A whole exported session; False when one with that id exists."""
    if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (r["id"],)).fetchone():
        return False
    conn.execute(
        "INSERT INTO sessions (id, collection, context, started_at, ended_at, outcome_score, summary) "
        "VALUES (?, ?, jsonb(?), ?, ?, ?, ?)",
        (r["id"], r["collection"], json.dumps(r["context"]), r["started_at"], r["ended_at"],
         r["outcome_score"], json.dumps(r["summary"]) if r["summary"] is not None else None),
    )
    return True
