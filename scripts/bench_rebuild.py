"""Recall while a stale vector snapshot is rebuilt: on a thread of the recalling process vs a process of its own.

A server that notices a stale snapshot keeps answering while it is rebuilt. This measures
what the rebuild costs its recalls (p50/p90 of plain recall, query vectors given), the
server's own peak resident memory, and the builder's time and peak memory, for the ways
of running the same build (``rebuild_stale``): a thread of the server (robotmem before
2026-12-03), ``robotmem.search.rebuild_process`` at the server's own CPU priority (before
2026-12-04 evening) and at the lower priority robotmem gives it now (``--modes``).

Needs a store with a published snapshot, e.g. the one scripts/bench_recall.py generates:

    python scripts/bench_rebuild.py --store /tmp/robotmem-bench/bench1000000.db --model bench-clustered/384

Each round publishes a new snapshot of the same rows.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from robotmem import Memory
from robotmem.search import rebuild_process
from robotmem.search.ann_index import index_folder, newest_file, rebuild_stale


class GivenVector:
    """An embedder that is never asked: every recall passes its query vector."""

    def __init__(self, model_id: str, dim: int) -> None:
        self.model_id, self.dim = model_id, dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise RuntimeError("the benchmark passes query vectors")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def recall_until(mem: Memory, queries: np.ndarray, done: Callable[[], bool]) -> list[float]:
    times = []
    i = 0
    while not done():
        t0 = time.perf_counter()
        mem.recall("robot arm", n=10, query_vector=queries[i % len(queries)], min_relevance=0)
        times.append(time.perf_counter() - t0)
        i += 1
    return times


def on_thread(mem: Memory, collection: str, model: str, dim: int, seq: int) -> Callable[[], bool]:
    build = threading.Thread(target=rebuild_stale, args=(mem._db, collection, model, dim, seq))
    build.start()
    return lambda: not build.is_alive()


def in_process(store: Path, collection: str, model: str, dim: int, seq: int, child_peak: list[float]) -> Callable[[], bool]:
    child = rebuild_process.start(store, collection, model, dim, seq)
    assert child is not None

    status = Path(f"/proc/{child.pid}/status")
    calls = [0]

    def done() -> bool:
        # The child's own high-water mark (VmHWM is of its image since exec; the rusage a wait
        # returns also holds the parent's RSS at fork).
        calls[0] += 1
        if calls[0] % 20 == 1:
            try:
                hwm = next(line for line in status.read_text().splitlines() if line.startswith("VmHWM:"))
                child_peak[:] = [int(hwm.split()[1]) / 1024]
            except (FileNotFoundError, StopIteration, ProcessLookupError):
                pass
        return child.poll() is not None

    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--model", required=True, help="model id of the stored vectors")
    parser.add_argument("--collection", default="default")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the modes, alternating")
    parser.add_argument("--modes", nargs="+", choices=("thread", "process", "full-priority"),
                        default=["process", "full-priority"],
                        help="process: the builder robotmem starts; full-priority: the same at the server's priority")
    args = parser.parse_args()
    folder = index_folder(args.store)
    assert folder is not None and newest_file(folder, args.collection, args.model) is not None, "no snapshot to rebuild"
    with apsw.Connection(f"file:{args.store}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI) as db:
        rows: list[Any] = db.execute(
            "SELECT vector, dim FROM embeddings WHERE collection = ? AND model_id = ? ORDER BY random() LIMIT 200",
            (args.collection, args.model)).fetchall()
    dim = int(rows[0][1])
    queries = np.stack([np.frombuffer(r[0], dtype=np.float32) for r in rows])
    print(f"{platform.node()}: {os.cpu_count()} cores, {args.store} ({args.collection}, {args.model})")
    mem = Memory(args.store, embedder=GivenVector(args.model, dim))
    stop_after = time.perf_counter() + 20
    recall_until(mem, queries, lambda: time.perf_counter() > stop_after)  # warm: pages, mirror, snapshot
    idle = recall_until(mem, queries, lambda: time.perf_counter() > stop_after + 10)
    print(f"idle: p50 {np.median(idle) * 1e3:.1f} ms, p90 {np.percentile(idle, 90) * 1e3:.1f} ms, "
          f"server peak RSS {peak_rss_mb():.0f} MB")
    niceness = rebuild_process.NICENESS
    for _ in range(args.rounds):
        for mode in args.modes:
            seq = newest_file(folder, args.collection, args.model)[1]  # type: ignore[index]
            child_peak: list[float] = []
            started = time.perf_counter()
            rebuild_process.NICENESS = 0 if mode == "full-priority" else niceness
            done = (on_thread(mem, args.collection, args.model, dim, seq) if mode == "thread"
                    else in_process(args.store, args.collection, args.model, dim, seq, child_peak))
            during = recall_until(mem, queries, done)
            builder = f", builder peak RSS {child_peak[0]:.0f} MB" if child_peak else ""
            print(f"rebuild, {mode}: {time.perf_counter() - started:.1f} s, {len(during)} recalls during it, "
                  f"p50 {np.median(during) * 1e3:.1f} ms, p90 {np.percentile(during, 90) * 1e3:.1f} ms, "
                  f"server peak RSS {peak_rss_mb():.0f} MB{builder}", flush=True)
    mem.close()


if __name__ == "__main__":
    main()
