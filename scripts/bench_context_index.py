"""Bulk-insert cost of indexing context identifiers, against the content-only index in the same run.

Writes the same records (bench_recall.py's synthetic perceptions: a description plus a
context with a robot id, a task, a grip force and a position) through
``save_perceptions`` in batches of 1,000 into two fresh stores side by side, alternating
batch by batch between two builds of the full-text entry: the content's tokens only (before context identifiers were indexed)
and ``memory_search_text`` (content plus the context's identifiers). Vectors come from a
stand-in (bench_recall.BenchVectors) so the figures are the store's own cost.

    python scripts/bench_context_index.py [--records 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_recall as br

import robotmem.service as service
from robotmem import Memory
from robotmem.store.tokens import index_tokens, memory_search_text


def content_only(content: str, context: dict[str, Any] | None) -> str:
    return index_tokens(content)


def insert_rates(records: list[list[dict[str, Any]]], vectors: list[np.ndarray]) -> dict[str, float]:
    """Both builds into two stores open side by side, batch by batch in alternating order.

    Interleaving at the batch level (A B, then B A) spreads the other processes' load on a
    shared machine evenly over the two, where whole runs one after the other do not.
    """
    builds = {"content only": content_only, "with context identifiers": memory_search_text}
    elapsed = dict.fromkeys(builds, 0.0)
    embedder = br.BenchVectors()
    with tempfile.TemporaryDirectory() as tmp:
        stores = {name: Memory(Path(tmp) / f"{i}.db", embedder=embedder) for i, name in enumerate(builds)}
        try:
            for n, (batch, vecs) in enumerate(zip(records, vectors)):
                embedder.batch = vecs
                for name in (list(builds) if n % 2 == 0 else list(builds)[::-1]):
                    service.memory_search_text = builds[name]  # type: ignore[attr-defined]
                    t0 = time.perf_counter()
                    stores[name].save_perceptions(batch)
                    elapsed[name] += time.perf_counter() - t0
        finally:
            for store in stores.values():
                store.close()
            service.memory_search_text = memory_search_text  # type: ignore[attr-defined]
    total = sum(len(b) for b in records)
    return {name: total / seconds for name, seconds in elapsed.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    centres = br.clustered(rng, rng.standard_normal((br.CENTRES, br.DIM)).astype(np.float32), br.CENTRES)
    records = [[br.record(i, args.records, rng) for i in range(s, s + 1000)] for s in range(0, args.records, 1000)]
    vectors = [br.clustered(rng, centres, 1000) for _ in records]
    sample = [r["metadata"] for b in records for r in b][:2000]
    texts = [r["description"] for b in records for r in b][:2000]
    t0 = time.perf_counter()
    for text, ctx in zip(texts, sample):
        memory_search_text(text, ctx)
    t1 = time.perf_counter()
    for text in texts:
        index_tokens(text)
    t2 = time.perf_counter()
    print(f"load average {os.getloadavg()[0]:.2f}; {args.records:,} records, {args.rounds} rounds, interleaved")
    print(f"full-text entry per record: content only {(t2 - t1) / len(texts) * 1e6:.1f} us, "
          f"with context identifiers {(t1 - t0) / len(texts) * 1e6:.1f} us")
    rates: dict[str, list[float]] = {"content only": [], "with context identifiers": []}
    for _ in range(args.rounds):
        for name, rate in insert_rates(records, vectors).items():
            rates[name].append(rate)
    for name, values in rates.items():
        print(f"bulk insert, {name}: median {np.median(values):,.0f} records/s ({', '.join(f'{v:,.0f}' for v in values)})")
    ratios = np.array(rates["with context identifiers"]) / np.array(rates["content only"])
    print(f"ratio per round: {', '.join(f'{r:.3f}' for r in ratios)}; median {np.median(ratios):.3f} "
          f"(load average now {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
