"""The judged retrieval set (datasets/retrieval/) is well formed, and the scripts keep its splits apart.

Nothing here ranks a memory against a query: the report-only splits (held26 and held27) must stay
unseen until they are scored, to report. These checks read the files, parse the filters with robotmem's own
parser, evaluate them with the plain-Python reference evaluator, and call the scripts'
split handling.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from robotmem.search.filters import compile_filter

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "datasets" / "retrieval"
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "robotmem" / "search"))
import bench_retrieval as bench
import fit_relevance
from filter_reference import matches

#: The category counts each split was written with (datasets/retrieval/README.md): the first two
#: with five filtered queries, the later ones with six, held12 to held17 larger (one query decided a
#: category of nine).
FIRST = {"paraphrase": 9, "exact": 10, "chinese": 7, "filtered": 5, "no_answer": 10}
LATER = {"paraphrase": 9, "exact": 10, "chinese": 7, "filtered": 6, "no_answer": 10}
LARGER = {"paraphrase": 15, "exact": 10, "chinese": 7, "filtered": 13, "no_answer": 10}
#: held18 and held19 add only ordinary questions that share some of their answer's words (no memories).
NATURAL = {"natural": 40}
#: held20 to held27 mix all six categories, ordinary questions among them, nearer to how a store is asked.
MIXED = {"paraphrase": 10, "exact": 8, "chinese": 6, "filtered": 10, "natural": 12, "no_answer": 10}
WRITTEN = {
    "tune": FIRST,
    "held": FIRST,
    **dict.fromkeys(("held2", "held3", "held4", "held5", "held6", "held7", "held8", "held9", "held10", "held11"), LATER),
    **dict.fromkeys(("held12", "held13", "held14", "held15", "held16", "held17"), LARGER),
    "held18": NATURAL,
    "held19": NATURAL,
    "held20": MIXED,
    "held21": MIXED,
    "held22": MIXED,
    "held23": MIXED,
    "held24": MIXED,
    "held25": MIXED,
    "held26": MIXED,
    "held27": MIXED,
}


def _rows(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]


MEMORIES = _rows("memories.jsonl")
QUERIES = _rows("queries.jsonl")
CONTEXTS = {m["key"]: m["context"] for m in MEMORIES}


def test_memory_keys_are_unique_and_rows_complete():
    assert [k for k, n in Counter(m["key"] for m in MEMORIES).items() if n > 1] == []
    for m in MEMORIES:
        assert set(m) == {"key", "text", "context", "age_days"}, m["key"]
        assert m["text"].strip() and isinstance(m["context"]["robot"]["type"], str), m["key"]
        assert isinstance(m["age_days"], (int, float)) and m["age_days"] >= 0, m["key"]


def test_every_memory_can_be_learned_as_written():
    # learn refuses a longer insight; the benchmark learns every memory's text as it is.
    from robotmem.validation import INSIGHT_MAX_CHARS

    assert [m["key"] for m in MEMORIES if len(m["text"]) > INSIGHT_MAX_CHARS] == []


def test_query_ids_are_unique_and_splits_known():
    assert [k for k, n in Counter(q["id"] for q in QUERIES).items() if n > 1] == []
    assert {q["split"] for q in QUERIES} == set(bench.SPLITS)
    assert {q["category"] for q in QUERIES} == set(bench.CATEGORIES)


@pytest.mark.parametrize("split", bench.SPLITS)
def test_each_split_has_the_categories_it_was_written_with(split: str):
    assert Counter(q.category for q in bench.load_queries(split)) == WRITTEN[split]


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q["id"])
def test_judgements_name_existing_memories_with_grades_one_or_two(query: dict[str, Any]):
    judged = query["judgements"]
    assert set(judged) <= set(CONTEXTS), set(judged) - set(CONTEXTS)
    assert set(judged.values()) <= {1, 2}
    if query["category"] == "no_answer":
        assert judged == {}
    else:
        assert 2 in judged.values(), "an answerable query needs at least one answer"


@pytest.mark.parametrize("query", [q for q in QUERIES if q["category"] == "filtered"], ids=lambda q: q["id"])
def test_filters_parse_and_hold_for_every_judged_memory(query: dict[str, Any]):
    compile_filter(query["filter"])
    outside = [k for k in query["judgements"] if not matches(CONTEXTS[k], query["filter"])]
    assert outside == [], "a judged memory the filter excludes can never be returned"
    assert not all(matches(c, query["filter"]) for c in CONTEXTS.values()), "a filter that keeps everything"


def test_only_filtered_queries_carry_a_filter():
    assert all(("filter" in q) == (q["category"] == "filtered") for q in QUERIES)


def test_fit_relevance_fits_on_tune_by_default_and_refuses_report_only_splits(capsys: pytest.CaptureFixture[str]):
    parser = argparse.ArgumentParser()
    assert {q.split for q in fit_relevance.fitting_queries(parser, ["tune"])} == {"tune"}
    both = fit_relevance.fitting_queries(parser, ["tune", "held"])
    assert Counter(q.split for q in both) == Counter(q["split"] for q in QUERIES if q["split"] in ("tune", "held"))
    report_only = ["held26", "held27"]
    tuning = [split for split in WRITTEN if split not in report_only]
    assert {q.split for q in fit_relevance.fitting_queries(parser, tuning)} == set(tuning)
    for bad in (["held26"], ["held27"], ["tune", "held26"], ["all"]):
        with pytest.raises(SystemExit):
            fit_relevance.fitting_queries(parser, bad)
        assert "--splits" in capsys.readouterr().err


def test_bench_loads_each_split_apart_and_refuses_an_unknown_one():
    assert sum(len(bench.load_queries(s)) for s in bench.SPLITS) == len(bench.load_queries("all")) == len(QUERIES)
    with pytest.raises(ValueError, match="split"):
        bench.load_queries("held28")
