"""Which memories a recall may return, stated once for SQL and for the vector index's arrays.

SQL checks these rules for full-text hits and filter candidates; the in-process vector
index checks them on its own copy of each row. :func:`eligible` states them once over
row fields and operations (:mod:`robotmem.store.decay`), so both read the same rules.
The collection, session and context filter are not here: the index is per collection and
receives the other two as a candidate set computed in SQL.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

from ..store.decay import SQL_OPS, Ops, Sql, SqlOps, decay_law
from .request import RecallRequest

__all__ = ["SQL_FIELDS", "Eligibility", "RowFields", "eligible", "eligible_sql", "rows_for"]


def rows_for(k: int, share: float) -> int:
    """How many ranked rows to check for k of them to pass where ``share`` of them pass, with a
    quarter to spare (each row checked is a row read)."""
    return math.ceil(1.25 * k / share)


@dataclass(frozen=True)
class Eligibility:
    now: float
    half_life_s: float
    min_confidence: float
    include_archived: bool
    since: float | None = None
    until: float | None = None

    @classmethod
    def of(cls, req: RecallRequest, now: float, half_life_s: float) -> Eligibility:
        return cls(now=now, half_life_s=half_life_s, min_confidence=req.min_confidence,
                   include_archived=req.include_archived, since=req.since, until=req.until)


class RowFields(Protocol):
    """The fields the rules read, in one rendering (SQL expressions or arrays over rows)."""

    @property
    def searchable(self) -> Any: ...  # status is active or archived
    @property
    def active(self) -> Any: ...
    @property
    def confidence(self) -> Any: ...
    @property
    def reinforced_at(self) -> Any: ...
    @property
    def protected(self) -> Any: ...
    @property
    def occurred_at(self) -> Any: ...


def eligible(rules: Eligibility, row: RowFields, ops: Ops) -> Any:
    """True where a row may be returned: live, confident enough after decay, inside the time window."""
    ok = row.searchable if rules.include_archived else row.active
    if rules.min_confidence > 0:
        decayed = decay_law(ops, row.confidence, row.reinforced_at, row.protected, ops.value(rules.now),
                            ops.value(rules.half_life_s))
        ok = ok & (decayed >= ops.value(rules.min_confidence))
    if rules.since is not None:
        ok = ok & (row.occurred_at >= ops.value(rules.since))
    if rules.until is not None:
        ok = ok & (row.occurred_at <= ops.value(rules.until))
    return ok


class _SqlFields:
    """The fields as columns of the memories table ``m``."""

    searchable = Sql("m.status IN ('active', 'archived')")
    active = Sql("m.status = 'active'")
    confidence = Sql("m.confidence")
    reinforced_at = Sql("m.reinforced_at")
    protected = Sql("m.protected")
    occurred_at = Sql("m.occurred_at")


SQL_FIELDS = _SqlFields()


def eligible_sql(rules: Eligibility, ops: SqlOps = SQL_OPS) -> Sql:
    """The rules as a condition on the memories table ``m`` (``ops``: SQLite's or PostgreSQL's SQL)."""
    result: Sql = eligible(rules, SQL_FIELDS, ops)
    return result
