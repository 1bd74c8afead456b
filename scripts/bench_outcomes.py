"""Outcome statistics benchmark: Memory.outcome_stats over 100,000 memories.

The store holds push trials like the FetchPush experiment's: an object type (3), a push
factor (3), task.success, episode.outcome and an object position in a 1 m square.
Each request shape is timed over random targets and object types, interleaved in the same
run on the same store: counted from the cached leaf columns (what Memory.outcome_stats
runs, robotmem.search.leaf_columns), by the leaf-index plan without them, and by the JSON
scan (correctness of all is checked against a plain-Python oracle in
tests/robotmem/search/test_outcomes.py). The last row is a control loop's cycle: one new
memory is written before each request, so the cached columns catch up every time.

    python scripts/bench_outcomes.py [--size 100000] [--queries 100] [--store FILE]
    python scripts/bench_outcomes.py --backend postgresql [--url URL]   # one plan there

PostgreSQL: the server at ``--url`` (or $ROBOTMEM_BENCH_POSTGRES_URL), else a temporary
pgserver (as scripts/bench_postgres.py).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from robotmem import Memory
from robotmem.search.outcome_request import build_outcome_request
from robotmem.search.outcomes import compute_outcome_stats

OBJECTS = ("slippery", "default", "heavy")
FACTORS = (0.25, 0.5, 1.0)


def fill(mem: Memory, size: int, rng: random.Random) -> None:
    batch = []
    for i in range(size):
        obj, factor = rng.choice(OBJECTS), rng.choice(FACTORS)
        ok = rng.random() < 0.5
        batch.append({
            "description": f"push trial {i}: {obj} object, factor {factor}",
            "perception_type": "procedural", "embed": False,
            "metadata": {"object": {"type": obj}, "params": {"push_factor": factor},
                         "task": {"success": ok}, "episode": {"outcome": 1.0 if ok else round(rng.random() * 0.5, 3)},
                         "spatial": {"object_position": [rng.random(), rng.random(), 0.42]}},
        })
        if len(batch) == 5000:
            mem.save_perceptions(batch)
            batch = []
    if batch:
        mem.save_perceptions(batch)


def requests(rng: random.Random) -> dict[str, Callable[[], dict[str, Any]]]:
    def near(**extra: Any) -> dict[str, Any]:
        spatial: dict[str, Any] = {"field": "spatial.object_position", "target": [rng.random(), rng.random(), 0.42]}
        spatial.update(extra)
        return spatial

    return {
        "filter (1/3 of the store)": lambda: {"context_filter": {"object.type": rng.choice(OBJECTS)}},
        "filter + within 0.05 m": lambda: {"context_filter": {"object.type": rng.choice(OBJECTS)},
                                            "spatial_sort": near(max_distance=0.05)},
        "filter + 200 nearest": lambda: {"context_filter": {"object.type": rng.choice(OBJECTS)},
                                         "spatial_sort": near(), "k": 200},
        "query word + filter": lambda: {"query": rng.choice(OBJECTS), "context_filter": {"task.success": True}},
        "whole collection": dict,
    }


def timed(mem: Memory, plan: str, kwargs: dict[str, Any]) -> tuple[float, int]:
    """``plan``: "cached" (the leaf plan counting from mem's cached columns), "index" or "scan"."""
    req = build_outcome_request(group_by="params.push_factor", collection=mem.collection, **kwargs)
    columns = mem._leaf_columns if plan == "cached" else None
    start = time.perf_counter()
    with mem._db.read() as conn:
        result = compute_outcome_stats(conn, req, plan="scan" if plan == "scan" else "index", columns=columns)
    return time.perf_counter() - start, int(result["matched"])


def _ms(samples: list[float], q: float) -> str:
    return f"{np.percentile(samples, q) * 1000:.1f}" if samples else "-"


def measure(mem: Memory, queries: int, scan_queries: int) -> None:
    if mem._db.kind != "sqlite":
        scan_queries = 0  # PostgreSQL has one plan
    start = time.perf_counter()
    mem.outcome_stats("params.push_factor")  # warm the page cache (and load the cached columns)
    print(f"first request (loads the columns) {(time.perf_counter() - start) * 1000:.0f} ms")
    print(f"load average {os.getloadavg()[0]:.2f} at the start")
    print(f"{'request':<28} {'p50 ms':>8} {'p95 ms':>8} {'leaf p50':>9} {'leaf p95':>9} {'scan p50':>9} "
          f"{'matched (median)':>17}")
    rng = random.Random(11)
    shapes = requests(rng)
    shapes["filter (1/3), after a write"] = shapes["filter (1/3 of the store)"]
    for name, make in shapes.items():
        times: dict[str, list[float]] = {"cached": [], "index": [], "scan": []}
        matched: list[int] = []
        for i in range(queries):  # interleaved, so every plan sees the same load
            kwargs = make()
            if name.endswith("after a write"):
                mem.learn(f"push trial extra {i}", context={"object": {"type": "heavy"}, "params": {"push_factor": 0.5},
                                                            "task": {"success": i % 2 == 0}})
            for plan in ("cached", "index", "scan") if i < scan_queries else ("cached", "index"):
                took, found = timed(mem, plan, kwargs)
                times[plan].append(took)
            matched.append(found)
        if mem._db.kind != "sqlite":
            times["index"] = []
        print(f"{name:<28} {_ms(times['cached'], 50):>8} {_ms(times['cached'], 95):>8} {_ms(times['index'], 50):>9} "
              f"{_ms(times['index'], 95):>9} {_ms(times['scan'], 50):>9} {int(np.median(matched)):>17,}")
    if mem._db.kind == "sqlite":
        floor = []
        for _ in range(queries):
            start = time.perf_counter()
            with mem._db.read() as conn:
                for path in ('$.params."push_factor"', "$.task.success", "$.episode.outcome"):
                    conn.execute("SELECT count(*) FROM context_leaves WHERE collection = 'default' AND path = ?",
                                 [path]).fetchall()
            floor.append(time.perf_counter() - start)
        print(f"{'(floor: step 3 leaf paths)':<28} {np.percentile(floor, 50) * 1000:>8.1f} "
              f"{np.percentile(floor, 95) * 1000:>8.1f}")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


def run(location: str | Path, args: argparse.Namespace) -> None:
    with Memory(location, embedder=None) as mem:
        if not sum(mem.stats()["collections"].get("default", {}).get("by_status", {}).values()):
            t = time.perf_counter()
            fill(mem, args.size, random.Random(7))
            print(f"{args.size:,} memories filled in {time.perf_counter() - t:.1f} s")
        print(f"{mem._db.kind}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
              f"{sum(mem.stats()['collections']['default']['by_status'].values()):,} memories")
        measure(mem, args.queries, args.scan_queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--scan-queries", type=int, default=10, help="requests timed by the JSON scan (slow)")
    parser.add_argument("--store", type=Path, help="keep the SQLite store in FILE (filled when it does not exist)")
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--url", default=os.environ.get("ROBOTMEM_BENCH_POSTGRES_URL"),
                        help="PostgreSQL server for --backend postgresql (default: a temporary pgserver)")
    args = parser.parse_args()
    if args.backend == "postgresql":
        from bench_postgres import postgres_database

        with postgres_database(args.url, "robotmem_bench_outcomes") as url:
            run(url, args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        run(args.store or Path(tmp) / "m.db", args)


if __name__ == "__main__":
    main()
