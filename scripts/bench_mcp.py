"""Benchmark the MCP server through the SDK's own clients and print the figures.

    python scripts/bench_mcp.py [--calls 200] [--concurrency 8]

Measures, each against a fresh ROBOTMEM_HOME in a temporary directory:

* cold start over stdio: spawn -> ``initialize`` answered, with an EMPTY model cache (the
  model must be built) and with a built one; and how long until the model is ready;
* per-call latency over stdio and over streamable HTTP (loopback): learn and recall with
  the real model (p50/p95/max, milliseconds);
* recall throughput over HTTP with several clients at once.

Only loopback traffic, bounded in count; the server subprocesses are stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
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


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    options = parser.parse_args()
    anyio.run(main, options.calls, options.concurrency)
