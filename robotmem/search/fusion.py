"""Fuse the full-text and vector candidates into one ranking by calibrated relevance.

Every candidate either side found gets its match score from its own match with the query
(robotmem.search.relevance), not from its rank in either list: a memory only the vector
side found is not capped below one both lists share, and a keyword match is not scaled
by a cosine that says nothing about part numbers. Recency and confidence then order
memories of similar match: ``score = match x (1 - W + W x confidence)`` with
``W = CONFIDENCE_WEIGHT``, so a fresh, reinforced memory wins a tie but never turns an
irrelevant one into an answer. Hits are ordered on the match score, not on the calibrated
relevance, because calibration saturates near 1 where near-duplicates still differ, and
because relevance also weighs how far the model puts a memory behind the nearest candidate
(robotmem.search.relevance), which would let the cosine outvote an exact value.

One rule orders across candidates: a memory that gives the value the query writes with its unit
("12 N·m shoulder assist") ranks above the first memory that gives that unit only with another
number ("8 N·m of assist"), when it holds at least half of the words that near-duplicate shares
with the query (``values_first``). The near-duplicate often restates more of the question's
words, and its cosine cannot tell 8 from 12; the word guard keeps a memory that shares only the
number ("a 12 N·m bolt") where it was. Relevance, a property of each pair, is not changed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import apsw

from ..store.backend import dialect_of
from . import sql
from .relevance import (VALUE_HELD, VALUE_OTHER, MatchFeatures, QueryTerms, fit_for, match_features, match_score,
                        narrowness, query_terms, relevance, trusted_cosine)

__all__ = ["CONFIDENCE_WEIGHT", "RELEVANCE_DIGITS", "Fused", "fuse", "fuse_more", "order_score", "values_first"]

#: The share of the ordering score that decayed confidence (recency x reinforcement) decides:
#: enough to order ties, too little to lift a weaker match over a clearly better one. At 0.05 it
#: reordered near-ties of the cosine against the judged answer on all four blind splits (held10 to
#: held13) and on 7 of 14 splits in all; at 0.02 on 3 (docs/recall.md, eleventh pass).
CONFIDENCE_WEIGHT = 0.02
#: Relevance is reported (and cut by min_relevance) to this many decimals.
RELEVANCE_DIGITS = 4
#: values_first: a memory with the value asked for goes above its near-duplicate when it holds at least
#: this share of the words the near-duplicate holds (0.3 to 0.6 rank the tuning splits alike).
HOLDER_WORDS = 0.5


@dataclass(frozen=True)
class Fused:
    """Every candidate's match score (best first: the ranking) and calibrated relevance."""

    match: dict[int, float] = field(default_factory=dict)
    relevance: dict[int, float] = field(default_factory=dict)
    #: The candidates' highest trusted cosine and how many memories the request's filter or session
    #: left (None: not narrowed): what relevance weighs besides the pair itself, kept so that
    #: memories added to the answer later share the scale.
    best: float = 0.0
    narrowed_to: int | None = None
    #: The query's terms (IDF weights, asked quantities), read once for the candidates and reused for
    #: memories added later; None when no candidate was scored.
    terms: QueryTerms | None = None
    #: Every candidate's signals, kept so that the ranking of memories added later is decided with them.
    features: dict[int, MatchFeatures] = field(default_factory=dict)


def fuse(
    conn: apsw.Connection, query: str, candidates: list[int], similarity: dict[int, float] | None,
    model_id: str | None = None, narrowed_to: int | None = None,
) -> Fused:
    """Score every candidate with the query; the match dict is best first (ties in candidate order).
    ``model_id``: the model of the cosines in ``similarity``, whose fitted mix scores them;
    ``narrowed_to``: how many memories the request's filter or session left (None: not narrowed)."""
    if not candidates:
        return Fused(narrowed_to=narrowed_to)
    terms = query_terms(conn, query, fit_for(model_id), narrowed_to)
    features = _features(conn, terms, candidates, similarity)
    if not features:
        return Fused(narrowed_to=narrowed_to, terms=terms)
    return _scored(features, max(trusted_cosine(f) for f in features.values()), narrowed_to, terms)


def fuse_more(
    conn: apsw.Connection, query: str, fused: Fused, more: list[int], similarity: dict[int, float] | None,
    model_id: str | None = None,
) -> Fused:
    """``fused`` with memories that joined the answer after the candidates were scored (an exact
    filter's other matches, memories without a spatial field) scored too, on the candidates' scale
    (their best cosine, the request's narrowness): a memory carries the same relevance however it
    came into the answer."""
    extra = [memory_id for memory_id in more if memory_id not in fused.match]
    if not extra:
        return fused
    terms = fused.terms if fused.terms is not None else query_terms(conn, query, fit_for(model_id), fused.narrowed_to)
    added = _scored(_features(conn, terms, extra, similarity), fused.best, fused.narrowed_to, terms)
    features = {**fused.features, **added.features}
    return Fused(match=_ranked(features), relevance={**fused.relevance, **added.relevance}, best=fused.best,
                 narrowed_to=fused.narrowed_to, terms=terms, features=features)


def _features(
    conn: apsw.Connection, terms: QueryTerms, candidates: list[int], similarity: dict[int, float] | None,
) -> dict[int, MatchFeatures]:
    """Each candidate's signals with the query (candidates no longer stored are left out). The contexts
    are read only for a query with an exact value, the only one whose words they can hold."""
    with_context = terms.value_share > 0
    if dialect_of(conn) == "postgresql":
        context = "m.context::text" if with_context else "NULL"
        q, p = f"SELECT m.id, m.search_text, m.content, {context} FROM memories m WHERE m.id = ANY(?)", [candidates]
    else:
        q, p = sql.texts_sql(json.dumps(candidates), with_context)
    texts = {memory_id: (search_text, content, context) for memory_id, search_text, content, context in conn.execute(q, p)}
    features: dict[int, MatchFeatures] = {}
    for memory_id in candidates:
        if memory_id in texts and memory_id not in features:
            search_text, content, context = texts[memory_id]
            cos = None if similarity is None else similarity.get(memory_id)
            features[memory_id] = match_features(terms, search_text, content, cos, context)
    return features


def _scored(features: dict[int, MatchFeatures], best: float, narrowed_to: int | None, terms: QueryTerms) -> Fused:
    """Match (best first; ties in candidate order) and relevance of every candidate."""
    narrow = narrowness(narrowed_to)
    # Rounded as reported, so that min_relevance cuts at the figure the caller sees.
    return Fused(match=_ranked(features),
                 relevance={memory_id: round(relevance(f, best, narrow), RELEVANCE_DIGITS)
                            for memory_id, f in features.items()},
                 best=best, narrowed_to=narrowed_to, terms=terms, features=features)


def _ranked(features: dict[int, MatchFeatures]) -> dict[int, float]:
    """Match scores, best first (ties in candidate order), with values_first applied."""
    match = dict(sorted(((memory_id, match_score(f)) for memory_id, f in features.items()), key=lambda kv: -kv[1]))
    return values_first(match, features)


def values_first(match: dict[int, float], features: dict[int, MatchFeatures]) -> dict[int, float]:
    """``match`` (best first) with the first memory holding the value asked for ranked just above the
    first near-duplicate with another value, where that holder holds at least HOLDER_WORDS of the
    near-duplicate's word coverage. It takes a score just above the near-duplicate's, by enough that
    confidence (order_score) cannot put it back below."""
    other = next((i for i in match if features[i].value == VALUE_OTHER), None)
    if other is None:
        return match
    floor = HOLDER_WORDS * features[other].word_coverage
    holder = next((i for i in match if features[i].value == VALUE_HELD and features[i].word_coverage >= floor), None)
    if holder is None or match[holder] > match[other]:
        return match
    lifted = {**match, holder: match[other] / (1.0 - CONFIDENCE_WEIGHT) + 1e-5}
    return dict(sorted(lifted.items(), key=lambda kv: -kv[1]))


def order_score(match: float, confidence: float) -> float:
    return match * (1.0 - CONFIDENCE_WEIGHT + CONFIDENCE_WEIGHT * confidence)
