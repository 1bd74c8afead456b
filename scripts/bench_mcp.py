"""Benchmark the MCP server through the SDK's own clients and print the figures.

    python scripts/bench_mcp.py [--calls 200] [--concurrency 8]

Measures, each against a fresh ROBOTMEM_HOME in a temporary directory:

* cold start over stdio: spawn -> ``initialize`` answered, with an EMPTY model cache (the
  model must be built) and with a built one; and how long until the model is ready;
* per-call latency over stdio and over streamable HTTP (loopback): learn and recall with
  the real model (p50/p95/max, milliseconds);
* recall throughput over HTTP with several clients at once.

``--tail STORE`` measures instead what a control loop sees: ``recall`` at ``--hz`` over stdio and
over HTTP against a copy of STORE (a robotmem home: ``STORE/memory.db``, embedded with the real
model), for ``--seconds`` each, with no writer (the reference, first and last) and beside each
writer a robot brings, alone and all together: the ROS bridge's batches (``save_perceptions`` of
500 embedded perceptions, another process), ``end_session`` of a long episode (through the same
server), a vector snapshot rebuild (``robotmem reindex --everything``, another process) and WAL
checkpoints (another process's unembedded batches, each followed by a TRUNCATE checkpoint).
Figures: p50, p99 and max latency and the longest gap between two answers (the loop's stall).

Only loopback traffic, bounded in count; the server subprocesses are stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "robotmem" / "mcp"))
sys.path.insert(0, str(REPO / "scripts"))

from mcp_client_helpers import (
    call_ok,
    http_session,
    read_json_resource,
    start_http_server,
    stdio_session,
    stop_http_server,
)

INSIGHTS = [
    "Grip force {i} N lifts the cup without slipping",
    "Approach shelf {i} from the left to avoid the cart",
    "Door {i} in corridor B sticks; push twice",
    "Battery drops 2% per minute while carrying load {i}",
]
QUERIES = ["how hard to grip a cup", "shelf approach side", "sticky door", "battery drain under load"]


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return (
        f"p50 {statistics.median(ordered) * 1000:7.2f} ms  p95 {p95 * 1000:7.2f} ms  "
        f"max {ordered[-1] * 1000:7.2f} ms  (n={len(ordered)})"
    )


async def _timed(calls: int, make: Callable[[int], Awaitable[Any]]) -> list[float]:
    samples = []
    for i in range(calls):
        started = time.perf_counter()
        await make(i)
        samples.append(time.perf_counter() - started)
    return samples


async def _latencies(session: Any, calls: int, label: str) -> None:
    learn = await _timed(
        calls,
        lambda i: call_ok(
            session, "learn", {"insight": INSIGHTS[i % 4].format(i=i), "context": {"params": {"i": i}}}
        ),
    )
    recall = await _timed(calls, lambda i: call_ok(session, "recall", {"query": QUERIES[i % 4], "n": 5}))
    print(f"{label:6s} learn   {_ms(learn)}")
    print(f"{label:6s} recall  {_ms(recall)}")


async def _wait_model_ready(session: Any) -> None:
    # A benchmark may poll: it measures, it does not synchronise a test.
    while (await read_json_resource(session, "robotmem://status"))["embeddings"] != "ready":
        await anyio.sleep(0.05)


async def cold_start(home: Path, models: Path, label: str) -> None:
    started = time.perf_counter()
    async with stdio_session(home, home / "server.log", ROBOTMEM_MODELS_DIR=str(models)) as session:
        initialized = time.perf_counter() - started
        await _wait_model_ready(session)
        ready = time.perf_counter() - started
    print(
        f"cold start ({label}): initialize {initialized * 1000:7.1f} ms, model ready {ready:6.2f} s after spawn"
    )


async def stdio_latency(home: Path, models: Path, calls: int) -> None:
    async with stdio_session(home, home / "server.log", ROBOTMEM_MODELS_DIR=str(models)) as session:
        await _wait_model_ready(session)
        await _latencies(session, calls, "stdio")


async def http_latency(home: Path, models: Path, calls: int, concurrency: int) -> None:
    server = start_http_server(home, ROBOTMEM_MODELS_DIR=str(models), ROBOTMEM_TOKEN="bench")
    try:
        async with http_session(server.url, "bench") as session:
            await _wait_model_ready(session)
            await _latencies(session, calls, "http")
        per_client = max(1, calls // concurrency)

        async def client() -> None:
            async with http_session(server.url, "bench") as session:
                for i in range(per_client):
                    await call_ok(session, "recall", {"query": QUERIES[i % 4], "n": 5})

        started = time.perf_counter()
        async with anyio.create_task_group() as tasks:
            for _ in range(concurrency):
                tasks.start_soon(client)
        elapsed = time.perf_counter() - started
        total = per_client * concurrency
        print(f"http   recall with {concurrency} clients: {total / elapsed:7.1f} calls/s ({total} calls)")
    finally:
        stop_http_server(server)


async def main(calls: int, concurrency: int) -> None:
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="robotmem-bench-") as tmp:
        root = Path(tmp)
        models = root / "models"
        for name in ("cold", "warm", "stdio", "http"):
            (root / name).mkdir()
        await cold_start(root / "cold", models, "empty model cache")
        await cold_start(root / "warm", models, "model cached")
        await stdio_latency(root / "stdio", models, calls)
        await http_latency(root / "http", models, calls, concurrency)


# -- the control loop's tail beside writers (--tail) ---------------------------------------

WRITERS = ("bridge", "end_session", "rebuild", "checkpoint")
MODEL_ID = "all-MiniLM-L6-v2/fp32"
EPISODE = 3000  # perceptions of the long episode an end_session consolidates


def _episode(store: Path, count: int) -> str:
    """A long episode, written before the clock starts; returns its session id."""
    import numpy as np

    from bench_recall import record
    from robotmem import Memory

    rng = np.random.default_rng(count)

    with Memory(store / "memory.db", embedder="auto") as mem:
        sid = mem.start_session(context={"robot": {"id": "arm-0"}, "task": {"name": "pick"}})["session_id"]
        for first in range(0, count, 500):
            mem.save_perceptions([{**record(i, 100_000, rng), "session_id": sid} for i in range(first, first + 500)])
    return sid


def run_writer(kind: str, store: Path) -> None:
    """One writer, in this process, until killed (started by ``--writer``)."""
    import numpy as np

    from bench_recall import record
    from robotmem import Memory

    rng = np.random.default_rng(os.getpid())
    db = store / "memory.db"
    if kind == "rebuild":
        # What robotmem.search.rebuild_process does when a recall finds the snapshot stale, at its priority.
        from robotmem.search.ann_index import index_folder, newest_file, rebuild_stale
        from robotmem.search.rebuild_process import NICENESS
        from robotmem.store.connection import Database

        os.nice(NICENESS)
        folder = index_folder(db)
        assert folder is not None
        database = Database(db)
        while True:
            newest = newest_file(folder, "default", MODEL_ID)
            rebuild_stale(database, "default", MODEL_ID, 384, newest[1] if newest else 0)
    embed = kind == "bridge"
    with Memory(db, embedder="auto" if embed else None) as mem:
        sid = mem.start_session()["session_id"]
        i = 0
        while True:
            mem.save_perceptions([{**record(i + j, 100_000, rng), "session_id": sid, "embed": embed}
                                  for j in range(500)])
            i += 500
            if kind == "checkpoint":
                import apsw

                conn = apsw.Connection(str(db))
                conn.execute("PRAGMA busy_timeout=10000")
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
                conn.close()


def _summary(label: str, samples: list[float], gaps: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return (f"{label:24s} p50 {statistics.median(ordered) * 1000:7.1f}  p99 {p99 * 1000:7.1f}  "
            f"max {ordered[-1] * 1000:7.1f}  stall {max(gaps) * 1000:7.1f} ms  (n={len(ordered)})")


async def _loop(session: Any, seconds: float, hz: float) -> tuple[list[float], list[float]]:
    """recall at ``hz`` for ``seconds``: each call's latency, and the gaps between answers."""
    period = 1.0 / hz
    samples: list[float] = []
    answered: list[float] = []
    start = time.perf_counter()
    tick = start
    while tick - start < seconds:
        await anyio.sleep(max(0.0, tick - time.perf_counter()))
        sent = time.perf_counter()
        await call_ok(session, "recall", {"query": QUERIES[len(samples) % 4], "n": 5})
        done = time.perf_counter()
        samples.append(done - sent)
        answered.append(done)
        tick = max(tick + period, done)
    gaps = [b - a for a, b in zip(answered, answered[1:])]
    return samples, gaps


async def _scenario(session: Any, other: Any, store: Path, kinds: tuple[str, ...],
                    seconds: float, hz: float, sessions: list[str]) -> tuple[list[float], list[float]]:
    procs = [subprocess.Popen([sys.executable, __file__, "--writer", kind, str(store)],
                              env={**os.environ, "PYTHONPATH": str(REPO)}) for kind in kinds if kind != "end_session"]
    try:
        if procs:
            await anyio.sleep(2.0)  # the writers past their start-up (model load) before the clock
        async with anyio.create_task_group() as tasks:
            if "end_session" in kinds:
                async def consolidate() -> None:
                    await anyio.sleep(0.5)
                    while sessions:
                        await call_ok(other, "end_session", {"session_id": sessions.pop(), "outcome_score": 0.8})

                tasks.start_soon(consolidate)
            result = await _loop(session, seconds, hz)
            tasks.cancel_scope.cancel()
        return result
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


SCENARIOS: tuple[tuple[str, ...], ...] = ((), *((kind,) for kind in WRITERS), WRITERS, ())


async def _tail_runs(session: Any, other: Any, store: Path, label: str, seconds: float, hz: float,
                     sessions: list[str]) -> None:
    await _wait_model_ready(session)
    for i in range(20):  # warm the caches the reference would otherwise pay for
        await call_ok(session, "recall", {"query": QUERIES[i % 4], "n": 5})
    for kinds in SCENARIOS:
        batch = [sessions.pop()] if "end_session" in kinds and sessions else []
        samples, gaps = await _scenario(session, other, store, kinds, seconds, hz, batch)
        name = "+".join(kinds) if len(kinds) < len(WRITERS) else "all four"
        print(f"{label:6s}" + _summary(name or "no writer (reference)", samples, gaps), flush=True)


async def tail(source: Path, seconds: float, hz: float) -> None:
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load {os.getloadavg()[0]:.2f}; recall at {hz:g} Hz, {seconds:g} s a figure")
    # The model cache the user already has (a temporary home's own would be built first).
    os.environ.setdefault("ROBOTMEM_MODELS_DIR", str(Path.home() / ".robotmem" / "models"))
    with tempfile.TemporaryDirectory(prefix="robotmem-tail-") as tmp:
        store = Path(tmp)
        for name in os.listdir(source):
            if name.startswith("memory.db"):
                copy = shutil.copytree if (source / name).is_dir() else shutil.copy2
                copy(source / name, store / name)
        for transport in ("stdio", "http"):
            sessions = [_episode(store, EPISODE) for _ in range(2)]
            if transport == "stdio":
                async with stdio_session(store, store / "server.log") as session:
                    await _tail_runs(session, session, store, transport, seconds, hz, sessions)
            else:
                server = start_http_server(store, ROBOTMEM_TOKEN="bench")
                try:
                    async with http_session(server.url, "bench") as session, \
                            http_session(server.url, "bench") as other:
                        await _tail_runs(session, other, store, transport, seconds, hz, sessions)
                finally:
                    stop_http_server(server)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--tail", type=Path, metavar="STORE", help="a robotmem home holding memory.db")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--hz", type=float, default=20.0)
    parser.add_argument("--writer", nargs=2, metavar=("KIND", "STORE"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.writer:
        run_writer(options.writer[0], Path(options.writer[1]))
    elif options.tail:
        anyio.run(tail, options.tail, options.seconds, options.hz)
    else:
        anyio.run(main, options.calls, options.concurrency)
