"""The reads consolidation needs, done before the write transaction.

Vectors come from the ``embeddings`` table (only those of the active model), never
from re-embedding: consolidating is cheap and works offline. A fact without a vector
of that model is compared by the text rule alone.
"""

from __future__ import annotations

import json
from typing import Any, cast

import apsw

from ..store.backend import as_vector_bytes, dialect_of
from .pool import FactPool

__all__ = ["NOT_ENDED", "earlier_facts", "earlier_texts", "episode_facts"]

#: Cut-off for "earlier" when the session being consolidated has not ended yet.
NOT_ENDED = float("inf")

_FACT_COLUMNS = "m.id, m.content, {context}, m.evidence_count, m.first_seen, m.last_seen, e.vector"
_CONTEXT_TEXT = {"sqlite": "json(m.context)", "postgresql": "m.context::text"}


def _columns(conn: Any) -> str:
    return _FACT_COLUMNS.format(context=_CONTEXT_TEXT[dialect_of(conn)])


def _pool(rows: list[Any], dim: int | None) -> FactPool:
    return FactPool.from_db_rows([(*r[:6], as_vector_bytes(r[6])) for r in rows], dim)
_VECTOR_JOIN = "LEFT JOIN embeddings e ON e.memory_id = m.id AND e.model_id = ?"


def episode_facts(conn: apsw.Connection, session_id: str, model_id: str | None, dim: int | None) -> FactPool:
    """Active, unprotected facts written in the session, oldest first: the merge sources."""
    rows = conn.execute(
        f"SELECT {_columns(conn)} FROM memories m {_VECTOR_JOIN} "
        "WHERE m.session_id = ? AND m.type = 'fact' AND m.status = 'active' AND NOT m.protected "
        "ORDER BY m.first_seen, m.id",
        (model_id, session_id),
    ).fetchall()
    return _pool(rows, dim)


def earlier_facts(
    conn: apsw.Connection, collection: str, session_id: str, ended_at: float, episode_ids: list[int],
    model_id: str | None, dim: int | None, *, only: list[int] | None = None,
) -> FactPool:
    """Facts that may absorb the episode's: same collection, unprotected, active or archived,
    from sessions that ended before this one (``ended_at``; ties broken by id) or from no
    session, and sharing robot.id / task.name / task.success with some episode fact.

    The identity columns are compared as JSON text produced by SQLite on both sides, so
    the pre-filter is exact; the full context rule runs afterwards in Python. ``only``:
    just these ids among them (the candidates of the indexed plan), in the same order.
    """
    sql, params = _earlier_query(conn, f"{_columns(conn)} FROM memories m {_VECTOR_JOIN}", (model_id,), collection,
                                 session_id, ended_at, episode_ids, only)
    return _pool(conn.execute(sql, params).fetchall(), dim)


def earlier_texts(
    conn: apsw.Connection, collection: str, session_id: str, ended_at: float, episode_ids: list[int],
) -> list[tuple[int, str]]:
    """(id, content) of the facts :func:`earlier_facts` returns, in its order: what the indexed
    plan scans for the word rule (no context to parse, no vector to read)."""
    sql, params = _earlier_query(conn, "m.id, m.content FROM memories m", (), collection, session_id, ended_at,
                                 episode_ids, None)
    return cast(list[tuple[int, str]], conn.execute(sql, params).fetchall())  # rows are tuples on both backends


def _earlier_query(
    conn: apsw.Connection, select: str, select_params: tuple[Any, ...], collection: str, session_id: str, ended_at: float, episode_ids: list[int],
    only: list[int] | None,
) -> tuple[str, tuple[Any, ...]]:
    cutoff = _finite(ended_at)
    sql = _EARLIER[dialect_of(conn)]
    among = "" if only is None else f"AND m.id IN ({sql['ids']})"
    return (
        f"""
        WITH keys(robot, task, success) AS (
            SELECT DISTINCT {sql["robot"].format(t="x")}, {sql["task"].format(t="x")}, {sql["success"].format(t="x")}
            FROM memories x WHERE x.id IN ({sql["ids"]})
        )
        SELECT {select}
        LEFT JOIN sessions s ON s.id = m.session_id
        WHERE m.collection = ? AND m.type = 'fact' AND m.status IN ('active', 'archived') AND NOT m.protected
          AND (
            (m.session_id IS NULL AND m.created_at <= ?)
            OR (s.ended_at IS NOT NULL AND m.session_id != ?
                AND (s.ended_at < ? OR (s.ended_at = ? AND s.id < ?)))
          )
          AND EXISTS (
            SELECT 1 FROM keys k WHERE ({sql["robot"].format(t="m")}) {sql["same"]} k.robot
              AND ({sql["task"].format(t="m")}) {sql["same"]} k.task
              AND ({sql["success"].format(t="m")}) {sql["same"]} k.success
          )
          {among}
        ORDER BY m.first_seen, m.id
        """,
        (sql["ids_param"](episode_ids), *select_params, collection, cutoff, session_id, cutoff, cutoff, session_id,
         *(() if only is None else (sql["ids_param"](only),))),
    )


# The identity values as JSON on both sides (exact), in each store's dialect.
_EARLIER: dict[str, dict[str, Any]] = {
    "sqlite": {
        "robot": "{t}.context -> '$.robot.id'", "task": "{t}.context -> '$.task.name'",
        "success": "{t}.context -> '$.task.success'", "same": "IS", "ids": "SELECT value FROM json_each(?)",
        "ids_param": json.dumps,
    },
    "postgresql": {
        "robot": "{t}.context #> '{{robot,id}}'", "task": "{t}.context #> '{{task,name}}'",
        "success": "{t}.context #> '{{task,success}}'", "same": "IS NOT DISTINCT FROM",
        "ids": "SELECT unnest(?::bigint[])", "ids_param": list,
    },
}


def _finite(value: float) -> float:
    """SQLite has no infinity literal in parameters that compares reliably; clamp to a huge REAL."""
    return max(min(value, 1e300), -1e300)

