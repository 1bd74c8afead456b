"""SQL for recall, built by small functions and run elsewhere (so each is testable and explainable).

Every builder returns ``(sql, params)``. ``m`` is always the memories table.
"""

from __future__ import annotations

from typing import Any

from ..store.decay import POSTGRES_OPS, SQL_OPS
from .eligibility import Eligibility, eligible_sql
from .request import RecallRequest

__all__ = [
    "candidates_sql",
    "eligibility_sql",
    "recent_sql",
    "texts_sql",
    "vector_sql",
]

Query = tuple[str, list[Any]]


def eligibility_sql(
    req: RecallRequest, now: float, half_life_s: float, *, with_filter: bool = True, dialect: str = "sqlite"
) -> Query:
    """Which memories a request may return, as a WHERE clause over ``m`` (the same text in both
    stores but for the decay expression; ``req.filter`` is already in the store's dialect)."""
    ops = POSTGRES_OPS if dialect == "postgresql" else SQL_OPS
    rules = eligible_sql(Eligibility.of(req, now, half_life_s), ops)
    parts = ["m.collection = ?", rules.text]
    params: list[Any] = [req.collection, *rules.params]
    if req.session_id is not None:
        parts.append("m.session_id = ?")
        params.append(req.session_id)
    if with_filter and req.filter is not None:
        parts.append(req.filter.sql)
        params += list(req.filter.params)
    return " AND ".join(parts), params


def _rows(source: Query | None) -> Query:
    """``memories m``, or only the rows whose ids ``source`` (a leaf-index superset of the filter) yields.

    CROSS JOIN pins the plan to rowid lookups driven by the (small) source.
    """
    if source is None:
        return "memories m", []
    return f"({source[0]}) AS src CROSS JOIN memories m ON m.id = src.memory_id", list(source[1])


def candidates_sql(req: RecallRequest, now: float, half_life_s: float, source: Query | None = None) -> Query:
    where, params = eligibility_sql(req, now, half_life_s)
    rows, row_params = _rows(source)
    return f"SELECT m.id FROM {rows} WHERE {where}", row_params + params


def vector_sql(memory_ids_json: str, model_id: str, query_blob: bytes, limit: int) -> Query:
    """Exact cosine ranking inside SQLite (sqlite-vec) over a small candidate set."""
    return (
        ("SELECT e.memory_id, 1.0 - vec_distance_cosine(e.vector, ?) AS similarity FROM embeddings e "
        "WHERE e.model_id = ? AND e.memory_id IN (SELECT value FROM json_each(?)) "
        "ORDER BY similarity DESC LIMIT ?"),
        [query_blob, model_id, memory_ids_json, limit],
    )


def recent_sql(
    req: RecallRequest, now: float, half_life_s: float, limit: int, exclude_json: str = "[]",
    source: Query | None = None,
) -> Query:
    where, params = eligibility_sql(req, now, half_life_s)
    rows, row_params = _rows(source)
    return (
        (f"SELECT m.id FROM {rows} WHERE {where} AND m.id NOT IN (SELECT value FROM json_each(?)) "
        "ORDER BY m.occurred_at DESC, m.id DESC LIMIT ?"),
        [*row_params, *params, exclude_json, limit],
    )


def texts_sql(memory_ids_json: str, with_context: bool = True) -> Query:
    """The indexed tokens, the text and (or NULL) the context as JSON text of a few memories (relevance
    reads them)."""
    context = "json(m.context)" if with_context else "NULL"
    return (
        f"SELECT m.id, m.search_text, m.content, {context} FROM json_each(?) AS j "
        "CROSS JOIN memories m ON m.id = j.value",
        [memory_ids_json],
    )
