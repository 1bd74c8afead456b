"""Recall on PostgreSQL before and after a share of the memories is superseded.

Superseded memories are never returned. While their vectors were in the (collection, model)'s
HNSW index they crowded the walk's candidates, and recall fell back to an exact scan of the
collection. Their vectors now leave the index (at the table's next vacuum). This prints recall p50/p95 and how many recalls took the exact scan, with every
memory live and then with ``--share`` of them superseded (as end_session marks merged groups).
Random unit vectors stand in for embeddings (bench_postgres.RandomVectors), on a temporary
pgserver. Run it once per tree to compare (PYTHONPATH=<other tree> python scripts/...):

    python scripts/bench_pg_superseded.py [--size 20000] [--share 0.5] [--queries 100]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import psycopg

from bench_postgres import DIM, RandomVectors, postgres_database, record

from robotmem import Memory
from robotmem.store.postgres.connection import PgConnection


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=20_000)
    parser.add_argument("--share", type=float, default=0.5)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    embedder = RandomVectors()
    exact = 0
    real = PgConnection.execute

    def counted(self: PgConnection, query: str, params: Any = ()) -> Any:
        nonlocal exact
        exact += "ORDER BY e.vector <=>" in query  # the uncast column: recall's exact scan
        return real(self, query, params)

    with postgres_database(None, "superseded") as url, Memory(url, embedder=embedder) as mem:
        for start in range(0, args.size, 1000):
            vectors = rng.standard_normal((1000, DIM)).astype(np.float32)
            embedder.batch = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
            mem.save_perceptions([record(i, rng) for i in range(start, start + 1000)])
        embedder.batch = None
        mem.rebuild_vector_indexes()
        queries = rng.standard_normal((args.queries, DIM)).astype(np.float32)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        PgConnection.execute = counted  # type: ignore[method-assign]

        def measure(label: str) -> None:
            nonlocal exact
            exact, times = 0, []
            for q in queries:
                embedder.next = q
                t = time.perf_counter()
                mem.recall("grip force", n=10)
                times.append(time.perf_counter() - t)
            print(f"{label}: recall p50 {np.percentile(times, 50) * 1000:.1f} ms, p95 "
                  f"{np.percentile(times, 95) * 1000:.1f} ms, exact scans {exact} of {len(times)}", flush=True)

        with mem.store.write() as conn:
            conn.execute("ANALYZE")
        measure(f"{args.size:,} memories, all live")
        with mem.store.write() as conn:
            conn.execute("UPDATE memories SET status = 'superseded' WHERE id % 100 < ?", (round(args.share * 100),))
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("VACUUM ANALYZE")  # as autovacuum would, soon after: old row versions leave the graph
        measure(f"{args.share:.0%} superseded")


if __name__ == "__main__":
    main()
