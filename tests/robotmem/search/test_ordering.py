"""How decayed confidence orders hits (robotmem.search.fusion.order_score): it breaks ties of the
match, and only ties."""

from __future__ import annotations

from pathlib import Path

from robotmem import Memory
from robotmem.search.fusion import order_score, values_first
from robotmem.search.relevance import VALUE_HELD, VALUE_NONE, VALUE_OTHER, MatchFeatures

DAY = 86_400.0


def test_a_slightly_better_match_keeps_its_place_whatever_the_confidences():
    # Decayed confidence spans about 0.3 (archived below) to 0.8 (fresh). At a 5 % weight a fresh
    # memory passed one with a 1.5 % better match, a difference of 0.005 in cosine, and on the
    # blind splits that reordered near-ties against the judged answer (docs/recall.md, eleventh pass).
    better, worse = 0.200, 0.197
    assert order_score(better, 0.3) > order_score(worse, 0.8)


def test_of_two_memories_with_the_same_match_the_fresher_comes_first(tmp_path: Path):
    # The same note from two robots (contexts differ, so both are kept): same words, same cosine.
    now = [1_800_000_000.0]
    text = "Suction cup lost grip on the wet carton"
    with Memory(tmp_path / "m.db", clock=lambda: now[0], embedder="auto") as mem:
        older = mem.learn(text, context={"robot": {"id": "arm-1"}})["memory_id"]
        now[0] += 20 * DAY
        newer = mem.learn(text, context={"robot": {"id": "arm-2"}})["memory_id"]
        hits = mem.recall("suction cup grip on a wet carton", n=2, min_relevance=0)["results"]
    assert [h["id"] for h in hits] == [newer, older]
    assert hits[0]["relevance"] == hits[1]["relevance"]


def _features(value: int, words: float) -> MatchFeatures:
    return MatchFeatures(meaning=0.5, trust=1.0, coverage=0.5, word_coverage=words, value=value)


def test_the_memory_with_the_value_asked_for_goes_just_above_its_near_duplicate():
    # "12 N·m shoulder assist": the 8 N·m memory restates "shoulder ... assist", the 12 N·m one only
    # "shoulder"; both are far above the rest.
    features = {1: _features(VALUE_OTHER, 1.0), 2: _features(VALUE_HELD, 0.63), 3: _features(VALUE_NONE, 0.4),
                4: _features(VALUE_OTHER, 0.4)}
    ranked = values_first({1: 0.49, 2: 0.48, 3: 0.20, 4: 0.16}, features)
    assert list(ranked) == [2, 1, 3, 4]
    # ahead by enough that the near-duplicate's fresher confidence cannot put it back
    assert order_score(ranked[2], 0.0) > order_score(ranked[1], 1.0)
    assert ranked[1] == 0.49 and ranked[3] == 0.20  # nobody else moves


def test_a_memory_that_shares_only_the_number_stays_where_it_was():
    # "a 12 N·m bolt" holds the value but little of the question's words
    features = {1: _features(VALUE_OTHER, 1.0), 2: _features(VALUE_NONE, 0.8), 3: _features(VALUE_HELD, 0.2)}
    match = {1: 0.6, 2: 0.4, 3: 0.3}
    assert values_first(match, features) == match


def test_a_holder_already_ahead_or_no_near_duplicate_changes_nothing():
    ahead = {1: _features(VALUE_HELD, 0.5), 2: _features(VALUE_OTHER, 1.0)}
    assert values_first({1: 0.7, 2: 0.6}, ahead) == {1: 0.7, 2: 0.6}
    plain = {1: _features(VALUE_NONE, 1.0), 2: _features(VALUE_HELD, 0.5)}
    assert values_first({1: 0.7, 2: 0.6}, plain) == {1: 0.7, 2: 0.6}
