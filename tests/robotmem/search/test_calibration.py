"""The calibration's shape (robotmem.search.relevance.calibrated), without a store."""

from __future__ import annotations

import pytest

from robotmem.search.relevance import ENGLISH_FIT, MULTILINGUAL_FIT, MatchFeatures, RelevanceFit, relevance


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


@pytest.mark.parametrize("fit", [ENGLISH_FIT, MULTILINGUAL_FIT], ids=["minilm", "e5"])
def test_behind_the_best_a_candidate_loses_relevance(fit: RelevanceFit):
    """The same cosine means less where the query's best is higher."""
    features = MatchFeatures(meaning=0.4, trust=1.0, coverage=0.0, meaning_weight=fit.meaning_weight, fit=fit)
    assert relevance(features, best_cosine=0.4) > relevance(features, best_cosine=0.6)
