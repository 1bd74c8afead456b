"""Fit relevance's weights on the splits of the judged set it is given (default: tune only).

For every tuning query it builds the candidates recall scores (the 50 nearest vectors, the
50 best BM25 matches and, for a filter that leaves fewer than NARROW_ROWS memories, all of
them), computes robotmem.search.relevance's signals for each, chooses the convex mix
(meaning weight, its damping by the query's share of exact values, coverage power, neutral
cosine, the coverage floor of wide questions without values, confidence weight) with the
best mean nDCG@5 over the categories by grid search, then calibrates it: a logistic
regression of "judged relevant (grade >= 1)" on the mixed score less the query's meaning
weight times its best cosine (the highest trusted cosine among its candidates, weighed up to
its 95th percentile over the queries), the request's narrowness (how few rows its filter
leaves) times the mixed score, whether the memory states no value of the kind of quantity
the query asks for (robotmem.search.quantities), the share of the query's words it holds,
the query's CJK share alone and times the mixed score (Chinese queries' own line), and the
query's share of exact values (Platt scaling with seven inputs). Paste the printed constants into robotmem/search/relevance.py and
robotmem/search/fusion.py.

    python scripts/fit_relevance.py [--splits tune [held] [held2] ... [held25]] [--model multilingual-e5-small]

``--model`` fits the constants of another embedding model (robotmem.search.relevance.RelevanceFit:
each model's cosines have their own scale); ``--model none`` those of recall without vectors (no
model installed, or a recall given no query vector), whose match is the words shared alone.

It fits on exactly the splits named (default ``tune``) and refuses the report-only ones
(``bench_retrieval.REPORT_ONLY``), which are scored to report, never fitted on.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import apsw
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_retrieval as bench

from robotmem.search.relevance import (NARROW_ROWS, fit_for, informative_tokens, match_features, narrowness,
                                      query_terms)
from robotmem.store.tokens import match_term

POOL = 50


def candidates(conn: apsw.Connection, q: bench.Query, cos: dict[int, float], allowed: set[int]) -> set[int]:
    dense = sorted((i for i in allowed if cos[i] >= 0.2), key=lambda i: -cos[i])[:POOL]
    tokens = informative_tokens(q.text)
    keyword: list[int] = []
    if tokens:
        match = " OR ".join(match_term(t) for t in tokens)
        keyword = [i for (i,) in conn.execute(
            "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rank", (match,)) if i in allowed][:POOL]
    # Recall ranks a filter that leaves fewer than NARROW_ROWS memories whole (every row is a candidate).
    few = allowed if q.filter is not None and len(allowed) < NARROW_ROWS else set()
    return set(dense) | set(keyword) | few


def fit(x: np.ndarray, y: np.ndarray, l2: float = 1e-3, steps: int = 50) -> np.ndarray:
    """Logistic regression by Newton's method (a small ridge keeps it finite on separable data)."""
    xb = np.hstack([np.ones((len(x), 1)), x])
    w = np.zeros(xb.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-xb @ w))
        grad = xb.T @ (p - y) + l2 * np.r_[0, w[1:]]
        hess = xb.T @ (xb * (p * (1 - p))[:, None]) + l2 * np.diag(np.r_[0, np.ones(len(w) - 1)])
        w -= np.linalg.solve(hess, grad)
    return w


@dataclass
class Pair:
    key: str
    grade: int
    features: np.ndarray  # meaning, trust, coverage, the query's value share, whether the request is wide
    confidence: float
    narrow: float  # the request's narrowness (relevance.narrowness of the rows its filter leaves)
    quantity_missing: float = 0.0  # the query asks for a kind of quantity the memory states none of
    word_coverage: float = 0.0  # the share of the query's word information the memory holds
    query_cjk: float = 0.0  # the query's CJK share


#: ``--model none``: recall without cosines (no model installed, a recall given no vector).
NO_VECTORS = "none"


def collect(queries: list[bench.Query], model: str | None = None) -> dict[str, list[Pair]]:
    """Every tuning query's candidate pairs with their signals; ``model`` NO_VECTORS: as recall without
    vectors sees them (keyword candidates only, no cosine)."""
    vectors = model != NO_VECTORS
    ages = {json.loads(line)["key"]: json.loads(line)["age_days"]
            for line in (bench.DATA / "memories.jsonl").read_text().splitlines()}
    out: dict[str, list[Pair]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        clock = bench.Clock()
        mem, keys = bench.build_store(Path(tmp) / "fit.db", clock, "auto", model if vectors else None)
        assert mem.embedder is not None
        fit = fit_for(mem.embedder.model_id if vectors else None)  # trust: whether the model reads Chinese
        conn = apsw.Connection(str(mem.path), flags=apsw.SQLITE_OPEN_READONLY)
        text_of = dict(conn.execute("SELECT id, search_text FROM memories"))
        content_of = dict(conn.execute("SELECT id, content FROM memories"))
        context_of = dict(conn.execute("SELECT id, json(context) FROM memories"))
        ids = sorted(keys)
        matrix = mem.embedder.embed([content_of[i] for i in ids])
        for q in queries:
            qv = mem.embedder.embed([q.text])[0]
            cos = dict(zip(ids, (matrix @ qv).tolist() if vectors else [-1.0] * len(ids)))
            allowed = bench.eligible(mem, keys, q)
            narrowed_to = len(allowed) if q.filter is not None else None
            terms = query_terms(conn, q.text, fit, narrowed_to)
            narrow = narrowness(narrowed_to)
            out[q.id] = []
            for i in candidates(conn, q, cos, allowed):
                f = match_features(terms, text_of[i], content_of[i], cos[i] if vectors else None, context_of[i])
                out[q.id].append(Pair(keys[i], q.judgements.get(keys[i], 0),
                                      np.array([f.meaning, f.trust, f.coverage, terms.value_share, terms.wide]),
                                      0.8 * 2 ** (-ages[keys[i]] / 30), narrow, float(f.quantity_missing),
                                      f.word_coverage, f.query_cjk))
        conn.close()
        mem.close()
    return out


def effective_meaning(f: np.ndarray, neutral: float) -> np.ndarray:
    return f[:, 1] * f[:, 0] + (1 - f[:, 1]) * neutral * f[:, 2]


def counted_coverage(f: np.ndarray, floor: float) -> np.ndarray:
    """relevance.counted_coverage: below ``floor`` as none in a wide request (QueryTerms.wide) for a
    question without exact values."""
    floored = np.clip((f[:, 2] - floor) / (1 - floor), 0, None)
    return np.where((f[:, 4] > 0) & (f[:, 3] == 0), floored, f[:, 2])


def mix(f: np.ndarray, w: float, damping: float, power: float, neutral: float, floor: float) -> np.ndarray:
    wq = w * (1 - damping * f[:, 3])
    return wq * effective_meaning(f, neutral) + (1 - wq) * counted_coverage(f, floor) ** power


def query_bests(pairs: dict[str, list[Pair]]) -> list[float]:
    """Each query's best trusted cosine among its candidates (queries with candidates only)."""
    return [float(max(p.features[1] * p.features[0] for p in ps)) for ps in pairs.values() if ps]


def best_cosines(pairs: dict[str, list[Pair]]) -> np.ndarray:
    """Each pair's query's best trusted cosine (relevance.calibrated's second input), in allpairs order."""
    sizes = [len(ps) for ps in pairs.values() if ps]
    return np.repeat(query_bests(pairs), sizes)


@dataclass
class Ranked:
    """One answerable query's candidates as arrays, for scoring many mixes quickly."""

    category: str
    features: np.ndarray
    confidence: np.ndarray
    gains: np.ndarray  # 2 ** grade - 1 of each candidate
    ideal: float  # the query's ideal DCG@5 over all its judged memories


def ranked_queries(queries: list[bench.Query], pairs: dict[str, list[Pair]]) -> list[Ranked]:
    out = []
    for q in queries:
        ps = pairs[q.id]
        if q.category == "no_answer" or not ps:
            continue
        ideal = sum((2**g - 1) / np.log2(i + 2) for i, g in enumerate(sorted(q.judgements.values(), reverse=True)[:bench.K]))
        out.append(Ranked(q.category, np.stack([p.features for p in ps]), np.array([p.confidence for p in ps]), np.array([2.0**p.grade - 1 for p in ps]), float(ideal)))
    return out


_DISCOUNT = 1 / np.log2(np.arange(bench.K) + 2)


def quality(ranked: list[Ranked], w: float, damping: float, power: float, neutral: float, floor: float,
            c: float) -> float:
    """Mean over categories of the mean nDCG@5 (bench_retrieval.ndcg) of the answerable tuning queries."""
    per_cat: dict[str, list[float]] = {}
    for r in ranked:
        s = mix(r.features, w, damping, power, neutral, floor) * (1 - c + c * r.confidence)
        top = np.argsort(-s, kind="stable")[:bench.K]
        per_cat.setdefault(r.category, []).append(float(r.gains[top] @ _DISCOUNT[:len(top)]) / r.ideal if r.ideal else 0.0)
    return float(np.mean([np.mean(v_) for v_ in per_cat.values()]))


def fitting_queries(parser: argparse.ArgumentParser, splits: list[str]) -> list[bench.Query]:
    """The queries of the named splits; a report-only or unknown split is an error naming --splits."""
    for split in splits:
        if split in bench.REPORT_ONLY:
            parser.error(f"--splits: {split} is scored to report; nothing is ever fitted on it")
        if split not in bench.TUNING:
            parser.error(f"--splits: {split!r} is not one of {', '.join(bench.TUNING)}")
    return [q for split in dict.fromkeys(splits) for q in bench.load_queries(split)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pick", nargs=6, type=float,
                        metavar=("MEANING", "DAMPING", "POWER", "NEUTRAL", "FLOOR", "CONFIDENCE"),
                        help="use this mix instead of the grid's best (and fit the calibration for it)")
    parser.add_argument("--splits", nargs="+", default=["tune"], metavar="SPLIT",
                        help=f"the splits to fit on, out of {', '.join(bench.TUNING)} (default: tune)")
    parser.add_argument("--model", help="the embedding_model to fit for (default: all-MiniLM-L6-v2), or "
                                         f"{NO_VECTORS!r}: recall without vectors")
    args = parser.parse_args()
    queries = fitting_queries(parser, args.splits)
    pairs = collect(queries, args.model)
    ranked = ranked_queries(queries, pairs)
    if args.pick is None:
        grid = sorted(((quality(ranked, w, d, p, n, fl, c), w, d, p, n, fl, c)
                       for w in np.arange(0.2, 0.81, 0.05) for d in (0.0, 0.5, 1.0) for p in (1.0, 1.5, 2.0, 3.0)
                       for n in (0.0, 0.2, 0.3, 0.4, 0.5) for fl in (0.0, 0.1, 0.15, 0.2, 0.3)
                       for c in (0.02, 0.05, 0.1, 0.2)), key=lambda r: -r[0])
        for row in grid[:8]:
            print("mean category nDCG@5 {:.3f}: meaning {:.2f}, damping {}, power {}, neutral cosine {}, "
                  "coverage floor {}, confidence {}".format(*row))
        # The grid's top is a plateau; pass --pick to choose a point inside it rather than its edge.
        _, w, damping, power, neutral, floor, c = grid[0]
    else:
        w, damping, power, neutral, floor, c = args.pick
        print(f"mean category nDCG@5 {quality(ranked, w, damping, power, neutral, floor, c):.3f} for the pick")
    allpairs = [p for ps in pairs.values() for p in ps]
    s = mix(np.stack([p.features for p in allpairs]), w, damping, power, neutral, floor)
    y = np.array([p.grade >= 1 for p in allpairs], dtype=float)
    narrow_match = np.array([p.narrow for p in allpairs]) * s
    quantity = np.array([p.quantity_missing for p in allpairs])
    words = np.array([p.word_coverage for p in allpairs])
    cjk = np.array([p.query_cjk for p in allpairs])
    # The best cosine is weighed up to the 95th percentile of the queries' best (above it the fit has
    # almost no data), and at minus the query's meaning weight times the match's slope: the match holds
    # the cosine at that weight, so for the best candidate relevance does not fall as its cosine rises
    # (and rises above the cap).
    cap = float(np.percentile(query_bests(pairs), 95)) if args.model != NO_VECTORS else 1.0
    f = np.stack([p.features for p in allpairs])
    meaning = w * (1 - damping * f[:, 3])  # each query's meaning weight
    # Above the cap a memory's own cosine counts twice (relevance.calibrated): a restatement is an answer.
    tied = s - meaning * np.minimum(best_cosines(pairs), cap) + meaning * np.maximum(0, f[:, 0] * f[:, 1] - cap)
    b, a, narrow, missing, word, chinese, chinese_match, values = fit(
        np.stack([tied, narrow_match, quantity, words, cjk, cjk * s, f[:, 3]], axis=1), y)
    print(f"{len(y)} pairs, {int(y.sum())} relevant")
    print(f"MEANING_WEIGHT, VALUE_DAMPING, COVERAGE_POWER, NEUTRAL_COSINE, COVERAGE_FLOOR = {w:.2f}, {damping}, {power}, "
          f"{neutral}, {floor}")
    print(f"CONFIDENCE_WEIGHT = {c}")
    print(f"PLATT_A, PLATT_B, PLATT_NARROW, PLATT_QUANTITY = {a:.2f}, {b:.2f}, {narrow:.2f}, "
          f"{missing:.2f}")
    print(f"PLATT_WORDS, PLATT_CHINESE, PLATT_CHINESE_MATCH, PLATT_VALUES = {word:.2f}, {chinese:.2f}, "
          f"{chinese_match:.2f}, {values:.2f}")
    print(f"BEST_CAP = {cap:.2f}")


if __name__ == "__main__":
    main()
