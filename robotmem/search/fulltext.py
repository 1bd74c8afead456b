"""Full-text candidates with bounded work.

BM25 has to score every document that contains a query word. Words that occur in a
large share of the collection ("the", "force" in a grasping lab) make that cost grow
with the store while adding almost nothing to the ranking (their IDF is near zero).
So the plan leaves out words found in more than ``COMMON_SHARE`` of the memories when
rarer words are present, and ranks the rarest words whose matches together stay within
``POSTING_BUDGET`` (in a store of a million memories a word in 2 % of them still has
20,000 matches to score). When every word is that common it keeps the rarest one, and,
only when vectors are searched too, scores just the newest ``COMMON_WINDOW`` matches of
what it kept when they exceed the budget: the vector side still scores every memory, so
such a query is not lost, only ranked mostly by meaning. When fewer than k of those newest
matches pass the request's filters, every match is scored after all; a selective filter's
exact set is always scored in full; without vectors every match is scored. FTS5's bm25()
would still count every match of the word before scoring the window; past
``TERM_RANK_FROM`` matches the window is ranked in bm25()'s order without it.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Hashable
from dataclasses import dataclass, replace
from typing import Any

import apsw
import numpy as np

from ..store.connection import scalar
from ..store.term_rank import MEAN_ROW_LENGTH, TERM_RANK, term_score
from ..store.tokens import match_term, query_tokens, token_parts
from . import sql
from .count_cache import CountCache, store_stamp
from .eligibility import rows_for
from .relevance import document_frequencies, informative_tokens
from .request import RecallRequest

__all__ = ["AMONG_ROWS_FROM", "COMMON_SHARE", "COMMON_WINDOW", "POSTING_BUDGET", "TERM_RANK_FROM", "FullTextPlan",
           "eligible_subset", "fulltext_hits", "plan_fulltext"]

COMMON_SHARE = 0.05
COMMON_MIN_DOCS = 2000
COMMON_WINDOW = 2000
#: BM25 scores every match of the words it is given (about 0.7-1.5 us each here), so the
#: words ranked together may match at most this many memories: the rarest come first. At
#: 1,000,000 memories 12,000 made the full-text side the larger half of a recall (p50 26 ms
#: against 21 ms with 4,000 and a window of 2,000, same run): the words it leaves out are
#: in more than 0.4 % of the memories, and the vector side still ranks every memory.
POSTING_BUDGET = 4_000
#: Matches of the one word of a window past which it is ranked without bm25(), whose count of
#: every match for the IDF (about 0.035 us a match here) then costs more than ranking the
#: window's ~2,000 rows in Python (robotmem.store.term_rank, about 1 us a row more than bm25()
#: in C). Windows at 1,000,000 memories: 48,000 matches 3.2 ms with bm25() against 5.7 ms;
#: 106,000 4.9 against 3.1; 507,000 25.6 against 5.4; 829,000 43 against 6.0.
TERM_RANK_FROM = 100_000
#: A selective filter's rows are read and counted for one plain word (``_among_rows``, about
#: 4 us a row) instead of walking the word's matches (about 0.1 us a match with bm25()'s count)
#: when the word has more than this many matches per row of the set.
AMONG_ROWS_FROM = 40
#: The first page of best-ranked matches whose eligibility is read, in multiples of k: an
#: explicit filter, session or time window may pass few of them; otherwise nearly all pass
#: (only forgotten, archived and decayed memories do not), and each row read costs.
PAGE_NARROWED, PAGE = 8, 2


@dataclass(frozen=True)
class FullTextPlan:
    match: str
    kept: tuple[str, ...]
    dropped: tuple[str, ...]
    min_rowid: int | None
    #: Matches of the kept words together (document frequencies).
    postings: int = 0

    @property
    def one_phrase(self) -> bool:
        """One plain word: a compound is two phrases, which bm25() weighs by their own IDFs."""
        return len(self.kept) == 1 and not token_parts(self.kept[0])

    @property
    def term_rank(self) -> bool:
        """Rank the window with robotmem.store.term_rank instead of bm25() (TERM_RANK_FROM)."""
        return self.min_rowid is not None and self.postings > TERM_RANK_FROM and self.one_phrase


def plan_fulltext(conn: apsw.Connection, text: str, *, allow_window: bool) -> FullTextPlan | None:
    everything = query_tokens(text)
    tokens = informative_tokens(text)  # stopwords go at any store size
    if not tokens:
        return None
    df = document_frequencies(conn, tokens)
    max_id = int(scalar(conn, "SELECT coalesce(max(id), 0) FROM memories"))
    limit = max(COMMON_MIN_DOCS, COMMON_SHARE * max_id)
    kept = _within_budget(sorted((t for t in tokens if df.get(t, 0) <= limit), key=lambda t: df.get(t, 0)), df)
    min_rowid = None
    if not kept:
        kept = [min(tokens, key=lambda t: df.get(t, 0))]
    postings = sum(df.get(t, 0) for t in kept)
    if postings > POSTING_BUDGET and allow_window:
        # The newest matches only: about COMMON_WINDOW of them.
        window = int(COMMON_WINDOW * max_id / postings)
        min_rowid = max(0, max_id - window)
    return FullTextPlan(
        match=" OR ".join(match_term(t) for t in kept),
        kept=tuple(kept),
        dropped=tuple(t for t in everything if t not in kept),
        min_rowid=min_rowid,
        postings=postings,
    )


def _within_budget(ordered: list[str], df: dict[str, int]) -> list[str]:
    """The rarest words whose matches together stay within POSTING_BUDGET (at least one word)."""
    kept: list[str] = []
    postings = 0
    for token in ordered:
        if kept and postings + df.get(token, 0) > POSTING_BUDGET:
            break
        kept.append(token)
        postings += df.get(token, 0)
    return kept


def fulltext_hits(
    conn: apsw.Connection, req: RecallRequest, plan: FullTextPlan, now: float, half_life_s: float, k: int,
    chosen: np.ndarray | None = None,
) -> list[int]:
    """Top-k memory ids by BM25 among eligible memories, best first.

    ``chosen``: every eligible memory, when a selective filter already computed them; BM25
    then scores only those matches. Otherwise rank in the FTS index alone and check
    eligibility (filters included) on the best-ranked matches in growing pages (the first
    sized by ``_first_page``, then 8x more each time): the first k that pass are exactly the
    eligible top k, and a broad filter reads the rows of a few pages instead of every match's.
    """
    if chosen is not None:
        return _among(conn, plan, chosen, k)
    hits = _ranked_pages(conn, req, plan, now, half_life_s, k)
    if len(hits) < k and plan.min_rowid is not None:
        # The newest matches held fewer than k that pass the filters: score every match.
        return _ranked_pages(conn, req, replace(plan, min_rowid=None), now, half_life_s, k)
    return hits


def _ranked_pages(
    conn: apsw.Connection, req: RecallRequest, plan: FullTextPlan, now: float, half_life_s: float, k: int,
) -> list[int]:
    q, p = _fts_only(plan)
    cursor = conn.execute(q, p)
    hits: list[int] = []
    key = _restrictions(req)
    stamp = store_stamp(conn) if key is not None else None  # a query: only restricted recalls keep shares
    page = _first_page(req, k, None if stamp is None else _PASS_SHARES.get(stamp, key))
    checked = 0
    try:
        while len(hits) < k:
            ranked = [row[0] for row in itertools.islice(cursor, page)]
            if not ranked:
                break
            eligible = eligible_subset(conn, req, ranked, now, half_life_s)
            hits += [m for m in ranked if m in eligible]
            checked += len(ranked)
            page *= 8
    finally:
        cursor.close()
    if stamp is not None and checked:
        _PASS_SHARES.put(stamp, key, len(hits) / checked)
    return hits[:k]


#: The share of best-ranked matches that passed a request's restrictions when last checked.
_PASS_SHARES: CountCache[float] = CountCache()


def _restrictions(req: RecallRequest) -> Hashable | None:
    """What decides which matches pass (None: nothing worth remembering, or unhashable)."""
    if not req.narrowed:
        return None
    key = ("pass share", req.collection, None if req.filter is None else (req.filter.sql, req.filter.params),
           req.session_id, req.since, req.until, req.include_archived)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _first_page(req: RecallRequest, k: int, share: float | None) -> int:
    """How many best-ranked matches to check first: PAGE x k without restrictions; with them
    PAGE_NARROWED x k, or, when the same restrictions passed a known share of matches before
    (a control loop's filter every cycle), enough for k at that share with a quarter to spare."""
    if not req.narrowed:
        return PAGE * k
    if not share:
        return PAGE_NARROWED * k
    return min(PAGE_NARROWED * k, max(PAGE * k, rows_for(k, share)))


def _among(conn: apsw.Connection, plan: FullTextPlan, chosen: np.ndarray, k: int) -> list[int]:
    """Top-k by BM25 among the matches that are in ``chosen``.

    ``+rowid`` keeps the set test out of FTS5's own plan (which would rerun the whole
    MATCH once per listed rowid): FTS5 walks the matches in rowid order, SQLite tests each
    against the set, and bm25() is computed only for the matches in it. A plain word with
    many more matches than the set is counted in the set's own rows instead (``_among_rows``).
    """
    if len(chosen) == 0:
        return []
    ids = "[" + ",".join(map(str, chosen.tolist())) + "]"
    if plan.one_phrase and plan.postings > AMONG_ROWS_FROM * len(chosen):
        return _among_rows(conn, plan, ids, k)
    # No newest-matches window: the set is small, and its matches may all be old.
    rows = conn.execute(
        "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? "
        "AND +rowid IN (SELECT value FROM json_each(?)) ORDER BY bm25(memories_fts) LIMIT ?",
        [plan.match, ids, k],
    )
    return [row[0] for row in rows]


def _among_rows(conn: apsw.Connection, plan: FullTextPlan, ids: str, k: int) -> list[int]:
    """``_among`` for one plain word, from the chosen rows' indexed text: FTS5 splits that text
    only at the spaces between our tokens, so the word's count and the row's length there are
    the index's own, and with one term bm25()'s order is term_score's. ``ids``: the set, a JSON array."""
    average = conn.execute(f"SELECT {MEAN_ROW_LENGTH}(memories_fts) FROM memories_fts WHERE memories_fts MATCH ? "
                           "LIMIT 1", (plan.match,)).fetchone()
    if average is None:
        return []
    word = plan.kept[0]
    scored: list[tuple[float, int]] = []
    rows = conn.execute("SELECT m.id, m.search_text FROM json_each(?) AS j CROSS JOIN memories m ON m.id = j.value",
                        (ids,))
    for memory_id, text in rows:
        tokens = text.split(" ")
        count = tokens.count(word)
        if count:
            scored.append((term_score(count, len(tokens), average[0]), memory_id))
    scored.sort()
    return [memory_id for _, memory_id in scored[:k]]


def _fts_only(plan: FullTextPlan) -> tuple[str, list[Any]]:
    """Every match, best BM25 first (FTS5 scores them all to sort them; reading on is cheap)."""
    floor = " AND rowid >= ?" if plan.min_rowid is not None else ""
    params: list[Any] = [plan.match] + ([plan.min_rowid] if plan.min_rowid is not None else [])
    order = f"{TERM_RANK}(memories_fts)" if plan.term_rank else "rank"
    return f"SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?{floor} ORDER BY {order}", params


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
