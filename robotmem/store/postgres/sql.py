"""PostgreSQL spellings of the expressions the SQLite store writes in its own dialect."""

from __future__ import annotations

from typing import Any

from .. import decay
from ..rows import HIT_COLUMNS

__all__ = ["HITS_SELECT", "effective_confidence_sql", "sql_literal", "tsvector_literal"]

Query = tuple[str, list[Any]]


def effective_confidence_sql(now: float, half_life_s: float, *, table: str = "m") -> Query:
    """The decay law of robotmem.store.decay, in PostgreSQL."""
    return decay.effective_confidence_sql(now, half_life_s, table=table, dialect="postgresql")


#: The columns of robotmem.store.rows.HIT_COLUMNS, in that order.
HITS_SELECT = "SELECT " + ", ".join(
    {"context": "m.context::text", "absorbed": "m.absorbed::text", "payload_summary": "p.summary"}.get(c, f"m.{c}")
    for c in HIT_COLUMNS
) + " FROM memories m LEFT JOIN payloads p ON p.memory_id = m.id"

_MAX_POSITION = 16383  # PostgreSQL's largest tsvector position


def tsvector_literal(search_text: str) -> str:
    """robotmem's token stream as a tsvector, lexemes verbatim (no PostgreSQL parser) with positions.

    Positions keep phrases ("grip force" for ``grip_force``) working as in FTS5.
    """
    positions: dict[str, list[int]] = {}
    for i, token in enumerate(search_text.split(), 1):
        positions.setdefault(token, []).append(min(i, _MAX_POSITION))
    return " ".join(
        _quote(token) + ":" + ",".join(str(p) for p in sorted(set(pos))[:256]) for token, pos in positions.items()
    )


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def tsquery_literal(tokens: list[str], parts_of: Any) -> str:
    """Any token may match; a compound token also matches its parts as a phrase (as match_term does)."""
    terms = []
    for token in tokens:
        parts = parts_of(token)
        term = _quote(token)
        if parts:
            term = "(" + term + " | " + " <-> ".join(_quote(p) for p in parts) + ")"
        terms.append(term)
    return " | ".join(terms)


def sql_literal(text: str) -> str:
    """A string constant written into the statement: a partial index's predicate is matched by the
    planner only against constants, never against parameters."""
    return "'" + text.replace("'", "''") + "'"
