"""Full-text candidates with bounded work.

BM25 has to score every document that contains a query word. Words that occur in a
large share of the collection ("the", "force" in a grasping lab) make that cost grow
with the store while adding almost nothing to the ranking (their IDF is near zero).
So the plan leaves out words found in more than ``COMMON_SHARE`` of the memories when
rarer words are present. When every word is that common it keeps the rarest one, and,
only when vectors are searched too and no exact filter narrows the request, scores just
that word's newest ``COMMON_WINDOW`` matches: the vector side still scores every
memory, so such a query is not lost, only ranked mostly by meaning. With a filter or
without vectors every match is scored, so filters stay exact.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import apsw

from ..store.connection import scalar
from ..store.tokens import match_term, query_tokens
from . import sql
from .relevance import informative_tokens
from .request import RecallRequest

__all__ = ["COMMON_SHARE", "COMMON_WINDOW", "FullTextPlan", "eligible_subset", "fulltext_hits", "plan_fulltext"]

COMMON_SHARE = 0.05
COMMON_MIN_DOCS = 2000
COMMON_WINDOW = 4000


@dataclass(frozen=True)
class FullTextPlan:
    match: str
    kept: tuple[str, ...]
    dropped: tuple[str, ...]
    min_rowid: int | None


def plan_fulltext(conn: apsw.Connection, text: str, *, allow_window: bool) -> FullTextPlan | None:
    everything = query_tokens(text)
    tokens = informative_tokens(text)  # stopwords go at any store size
    if not tokens:
        return None
    df = dict(conn.execute(
        "SELECT term, doc FROM memories_fts_vocab WHERE term IN (SELECT value FROM json_each(?))",
        (json.dumps(tokens),),
    ))
    max_id = int(scalar(conn, "SELECT coalesce(max(id), 0) FROM memories"))
    limit = max(COMMON_MIN_DOCS, COMMON_SHARE * max_id)
    kept = [t for t in tokens if df.get(t, 0) <= limit]
    min_rowid = None
    if not kept:
        rarest = min(tokens, key=lambda t: df.get(t, 0))
        kept = [rarest]
        if allow_window:
            # The newest matches of the rarest word: about COMMON_WINDOW of them.
            window = int(COMMON_WINDOW * max_id / max(df[rarest], 1))
            min_rowid = max(0, max_id - window)
    return FullTextPlan(
        match=" OR ".join(match_term(t) for t in kept),
        kept=tuple(kept),
        dropped=tuple(t for t in everything if t not in kept),
        min_rowid=min_rowid,
    )


def fulltext_hits(
    conn: apsw.Connection, req: RecallRequest, plan: FullTextPlan, now: float, half_life_s: float, k: int
) -> list[int]:
    """Top-k memory ids by BM25 among eligible memories, best first.

    First rank in the FTS index alone and check eligibility (filters included) on that
    page: when k of the best-ranked pass, they are exactly the eligible top k. Only
    when the page runs dry does SQLite rank every eligible match.
    """
    page = 8 * k
    q, p = _fts_only(plan, page)
    ranked = [row[0] for row in conn.execute(q, p)]
    eligible = eligible_subset(conn, req, ranked, now, half_life_s)
    hits = [m for m in ranked if m in eligible]
    if len(hits) >= k or len(ranked) < page:
        return hits[:k]
    q, p = sql.bm25_sql(req, plan.match, now, half_life_s, k, min_rowid=plan.min_rowid)
    return [row[0] for row in conn.execute(q, p)]


def _fts_only(plan: FullTextPlan, limit: int) -> tuple[str, list[Any]]:
    floor = " AND rowid >= ?" if plan.min_rowid is not None else ""
    params: list[Any] = [plan.match] + ([plan.min_rowid] if plan.min_rowid is not None else []) + [limit]
    return f"SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?{floor} ORDER BY rank LIMIT ?", params


def eligible_subset(conn: apsw.Connection, req: RecallRequest, ids: list[int], now: float, half_life_s: float) -> set[int]:
    if not ids:
        return set()
    where, params = sql.eligibility_sql(req, now, half_life_s)
    # CROSS JOIN pins the plan to rowid lookups of the given ids; left to itself the
    # planner may scan the collection index instead (100,000 rows for 50 ids).
    rows = conn.execute(
        f"SELECT m.id FROM json_each(?) AS j CROSS JOIN memories m ON m.id = j.value WHERE {where}",
        [json.dumps(ids), *params],
    )
    return {row[0] for row in rows}
