"""The shape of the mix and its calibration (robotmem.search.relevance), on made-up signals."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from robotmem import Memory
from robotmem.models import DEFAULT_MIN_RELEVANCE
from robotmem.search.relevance import (ENGLISH_FIT, MULTILINGUAL_FIT, NARROW_ROWS, MatchFeatures, QueryTerms,
                                      RelevanceFit, counted_coverage, match_score, query_terms, relevance)


def _best_candidate(fit: RelevanceFit, meaning: float) -> float:
    """The relevance of a question's best candidate that shares no word with it (a paraphrase, a
    restatement in other words): its cosine is the query's best."""
    features = MatchFeatures(meaning=meaning, trust=1.0, coverage=0.0, meaning_weight=fit.meaning_weight, fit=fit)
    return relevance(features, best_cosine=meaning)


@pytest.mark.parametrize("fit", [ENGLISH_FIT, MULTILINGUAL_FIT], ids=["minilm", "e5"])
def test_the_best_candidate_never_loses_relevance_as_its_cosine_rises(fit: RelevanceFit):
    values = [_best_candidate(fit, m / 100) for m in range(0, 101)]
    assert all(b >= a - 1e-9 for a, b in zip(values, values[1:]))
    # Above the cap the cosine counts upwards: a restatement at cosine 0.95 beats a vague match at 0.4.
    assert _best_candidate(fit, 0.95) > _best_candidate(fit, fit.best_cap) > 0
    assert _best_candidate(fit, 0.95) > _best_candidate(fit, 0.4) + 0.1


def test_a_restatement_sharing_no_word_is_an_answer_by_default():
    """MiniLM puts a restatement in other words at 0.85-0.95, above any best cosine the fit saw:
    there the memory's own cosine counts twice, so it passes the default where a near-topic
    memory at 0.8 does not."""
    assert _best_candidate(ENGLISH_FIT, 0.95) >= DEFAULT_MIN_RELEVANCE > _best_candidate(ENGLISH_FIT, 0.8)


@pytest.mark.parametrize("fit", [ENGLISH_FIT, MULTILINGUAL_FIT], ids=["minilm", "e5"])
def test_behind_the_best_a_candidate_loses_relevance(fit: RelevanceFit):
    """The same cosine means less where the query's best is higher."""
    features = MatchFeatures(meaning=0.4, trust=1.0, coverage=0.0, meaning_weight=fit.meaning_weight, fit=fit)
    assert relevance(features, best_cosine=0.4) > relevance(features, best_cosine=0.6)



def test_a_wide_question_counts_coverage_below_the_floor_as_none():
    """One shared word of a long question is what many unrelated memories have; among a few
    memories, or beside an exact value, it is evidence and counts in full."""
    fit = replace(ENGLISH_FIT, coverage_floor=0.15)
    words = QueryTerms(("bystanders", "blocked", "lift"), (2.0, 2.0, 2.0), 0.0, fit)
    assert words.coverage_floor == 0.15
    assert replace(words, wide=False).coverage_floor == 0.0
    assert QueryTerms(("lift", "12.5n"), (2.0, 4.0), 0.0, fit).coverage_floor == 0.0
    below = MatchFeatures(meaning=0.4, trust=1.0, coverage=0.12, meaning_weight=fit.meaning_weight, fit=fit,
                          coverage_floor=words.coverage_floor)
    assert counted_coverage(below) == 0.0
    assert counted_coverage(replace(below, coverage_floor=0.0)) == 0.12
    assert counted_coverage(replace(below, coverage=1.0)) == 1.0
    assert counted_coverage(replace(below, coverage=0.575)) == pytest.approx(0.5)
    shares = [counted_coverage(replace(below, coverage=c / 20)) for c in range(21)]
    assert all(b >= a for a, b in zip(shares, shares[1:]))
    # The ranking score sees the same: in a wide request the word below the floor adds nothing.
    assert match_score(below) == match_score(replace(below, coverage=0.0))
    assert match_score(replace(below, coverage_floor=0.0)) > match_score(below)


def test_a_request_is_wide_where_it_ranks_among_a_hundred_memories_or_more(tmp_path: Path):
    """The rows that compete: the filter's or session's when the request has one, else the store's."""
    with Memory(tmp_path / "m.db", embedder=None) as mem:
        for i in range(3):
            mem.learn(f"note {i} about the lift")
        conn = mem.store.connection()
        assert not query_terms(conn, "lift").wide  # a store of three memories
        assert query_terms(conn, "lift", narrowed_to=NARROW_ROWS).wide
        assert not query_terms(conn, "lift", narrowed_to=NARROW_ROWS - 1).wide
