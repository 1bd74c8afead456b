"""Outcome statistics benchmark: Memory.outcome_stats over 100,000 memories.

The store holds push trials like the FetchPush experiment's: an object type (3), a push
factor (3), task.success, episode.outcome and an object position in a 1 m square.
Each request shape is timed over random targets and object types (correctness is checked
against a plain-Python oracle in tests/robotmem/search/test_outcomes.py).

    python scripts/bench_outcomes.py [--size 100000] [--queries 100]
"""

from __future__ import annotations

import argparse
import platform
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from robotmem import Memory

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp, Memory(Path(tmp) / "m.db", embedder=None) as mem:
        t = time.perf_counter()
        fill(mem, args.size, rng)
        print(f"{platform.processor() or platform.machine()}, {args.size:,} memories filled in "
              f"{time.perf_counter() - t:.1f} s")
        mem.outcome_stats("params.push_factor")  # warm the page cache
        print(f"{'request':<28} {'p50 ms':>8} {'p95 ms':>8} {'matched (median)':>17}")
        for name, make in requests(rng).items():
            samples, matched = [], []
            for _ in range(args.queries):
                kwargs = make()
                start = time.perf_counter()
                result = mem.outcome_stats("params.push_factor", **kwargs)
                samples.append(time.perf_counter() - start)
                matched.append(result["matched"])
            print(f"{name:<28} {np.percentile(samples, 50) * 1000:>8.1f} {np.percentile(samples, 95) * 1000:>8.1f} "
                  f"{int(np.median(matched)):>17,}")


if __name__ == "__main__":
    main()
