"""PostgreSQL bulk insert: the HNSW index maintained row by row against loaded-then-built, one run.

The same records and vectors as scripts/bench_recall.py, written with ``save_perceptions``
in batches of 1,000 into two fresh databases of one server: in the first, one ``learn``
creates the collection's HNSW index before the load, so pgvector updates it row by row;
in the second the load finds no index and leaves it to be built once afterwards (what
``robotmem migrate`` and large first batches do). Prints records/s for both, end to end.

    python scripts/bench_pg_bulk.py [--size 20000] [--url postgresql://...]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_recall import CENTRES, DIM, BenchVectors, clustered, postgres_database, record

from robotmem import Memory


def load(url: str, size: int, *, index_first: bool) -> dict[str, float]:
    rng = np.random.default_rng(size)
    centres = np.random.default_rng(0).standard_normal((CENTRES, DIM)).astype(np.float32)
    embedder = BenchVectors()
    with Memory(url, embedder=embedder) as mem:
        if mem.stats()["memories"]:
            raise SystemExit(f"{mem.location} is not empty: drop the database first")
        if index_first:
            embedder.next = clustered(rng, centres, 1)[0]
            mem.learn("the index exists before the load")
            embedder.next = None
        t0 = time.perf_counter()
        for start in range(0, size, 1000):
            embedder.batch = clustered(rng, centres, 1000)
            mem.save_perceptions([record(i, size, rng) for i in range(start, start + 1000)])
        loaded = time.perf_counter() - t0
        built = mem.rebuild_vector_indexes()
        total = time.perf_counter() - t0
    return {"load s": loaded, "build s": total - loaded, "records/s end to end": size / total,
            "indexes built after": float(len(built))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=20_000)
    parser.add_argument("--url", default=os.environ.get("ROBOTMEM_BENCH_POSTGRES_URL"),
                        help="PostgreSQL server (default: a temporary pgserver)")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}; {args.size:,} records in batches of 1,000")
    for index_first, size_name in ((True, f"{args.size}_maintained"), (False, f"{args.size}_deferred")):
        with postgres_database(args.url, size_name) as url:
            figures = load(url, args.size, index_first=index_first)
        label = "index maintained row by row" if index_first else "loaded, then index built"
        print(f"{label:<30} " + "   ".join(f"{k} {v:,.1f}" for k, v in figures.items())
              + f"   (load average {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
