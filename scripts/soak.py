"""Soak the MCP streamable-HTTP server under bursty clients and report at intervals.

    python scripts/soak.py --duration 600 [--clients 16] [--interval 30] [--max-idle 15]

Starts ``robotmem serve --transport http`` on a fresh ROBOTMEM_HOME (real store, real
embedding model) and drives it with the SDK's HTTP client in bursts: each burst opens
1..--clients sessions that mix learn, recall (with filters), save_perception with a
payload, and start/end_session; then the clients leave and the server idles for up to
--max-idle seconds, long enough for its worker threads to retire (the SDK retires them
after 10 s idle), so a resource that leaks per thread or per session shows up as growth.

Every --interval seconds it prints: calls and throughput in the interval, p50/p99
latency, errors (tool errors and transport failures), the server's open files and RSS.
The last lines compare the first and last samples. Exit status 1 when any call failed
or open files grew.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "robotmem" / "mcp"))

from mcp_client_helpers import http_session, start_http_server, stop_http_server

OBJECTS = ["cup", "bowl", "bottle", "box", "sponge", "plate", "can", "book"]
PLACES = ["shelf", "table", "sink", "bin", "tray", "drawer"]


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def take(self) -> tuple[list[float], list[str]]:
        latencies, errors = self.latencies, self.errors
        self.latencies, self.errors = [], []
        return latencies, errors


def _operation(rng: random.Random, session_id: str | None, writes: float) -> tuple[str, dict[str, Any]]:
    obj, place = rng.choice(OBJECTS), rng.choice(PLACES)
    force = round(rng.uniform(5, 20), 1)
    roll = rng.random()
    if roll < 1.0 - writes:
        query = f"how to pick the {obj}"
        args: dict[str, Any] = {"query": query, "n": 5}
        if rng.random() < 0.3:
            args["context_filter"] = {"params.grip_force": {"$gte": 10}}
        return "recall", args
    if roll < 1.0 - writes * 0.45:
        # A small vocabulary makes exact repeats common: the duplicate path is exercised too.
        args = {"insight": f"Grip the {obj} at {force} N when it sits on the {place}",
                "context": {"params": {"grip_force": force}, "task": {"name": f"pick_{obj}"}}}
    else:
        args = {"description": f"Saw the {obj} on the {place}, {rng.randint(1, 99)} cm from the edge",
                "perception_type": "visual", "data": {"joints": [rng.random() for _ in range(7)]},
                "metadata": {"spatial": {"object_position": [rng.random(), rng.random(), 0.0]}}}
    if session_id is not None:
        args["session_id"] = session_id
    return ("learn" if "insight" in args else "save_perception"), args


async def _client(url: str, seconds: float, seed: int, tally: Tally, writes: float) -> None:
    rng = random.Random(seed)
    deadline = time.monotonic() + seconds
    try:
        async with http_session(url) as session:
            session_id = None
            if writes > 0 and rng.random() < 0.5:
                started = await session.call_tool("start_session", {"context": {"task": {"name": "soak"}}})
                session_id = (started.structured_content or {}).get("session_id")
            while time.monotonic() < deadline:
                tool, args = _operation(rng, session_id, writes)
                begin = time.perf_counter()
                result = await session.call_tool(tool, args)
                tally.latencies.append(time.perf_counter() - begin)
                if result.is_error:
                    tally.errors.append(f"{tool}: {result.structured_content}")
            if session_id is not None:
                ended = await session.call_tool("end_session", {"session_id": session_id, "outcome_score": 0.7})
                if ended.is_error:
                    tally.errors.append(f"end_session: {ended.structured_content}")
    except Exception as exc:  # noqa: BLE001 - a soak counts every failure instead of stopping
        tally.errors.append(f"client failed: {type(exc).__name__}: {exc}"[:300])


def _proc_sample(pid: int) -> tuple[int, float]:
    files = len(os.listdir(f"/proc/{pid}/fd"))
    rss_kb = 0
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
    return files, rss_kb / 1024


def _pct(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000 if ordered else float("nan")


async def _reporter(pid: int, tally: Tally, interval: float, start: float, samples: list[tuple[int, float]],
                    totals: dict[str, int]) -> None:
    print(f"{'t_s':>6} {'calls':>6} {'calls/s':>8} {'p50_ms':>8} {'p99_ms':>8} {'errors':>6} "
          f"{'files':>6} {'rss_mb':>7}", flush=True)
    while True:
        await anyio.sleep(interval)
        latencies, errors = tally.take()
        files, rss = _proc_sample(pid)
        samples.append((files, rss))
        totals["calls"] += len(latencies)
        totals["errors"] += len(errors)
        ordered = sorted(latencies)
        print(f"{time.monotonic() - start:6.0f} {len(latencies):6d} {len(latencies) / interval:8.1f} "
              f"{_pct(ordered, 0.5):8.1f} {_pct(ordered, 0.99):8.1f} {len(errors):6d} {files:6d} {rss:7.1f}",
              flush=True)
        for message in errors[:3]:
            print("   error:", message, flush=True)


async def _fill(url: str, count: int, rng: random.Random) -> None:
    """A store of ``count`` distinct memories before the load, so a write-free soak keeps its size."""
    async with http_session(url) as session:
        for i in range(count):
            obj, place = rng.choice(OBJECTS), rng.choice(PLACES)
            await session.call_tool("learn", {"insight": f"Fill {i}: grip the {obj} on the {place} gently",
                                              "context": {"params": {"grip_force": 5 + i % 16}}})


async def soak(url: str, pid: int, args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    if args.fill:
        await _fill(url, args.fill, rng)
    tally = Tally()
    samples: list[tuple[int, float]] = []
    totals = {"calls": 0, "errors": 0, "bursts": 0}
    start = time.monotonic()
    async with anyio.create_task_group() as reporting:
        reporting.start_soon(_reporter, pid, tally, args.interval, start, samples, totals)
        while time.monotonic() - start < args.duration:
            clients = rng.randint(1, args.clients)
            burst = rng.uniform(3, 20)
            async with anyio.create_task_group() as burst_group:
                for _ in range(clients):
                    burst_group.start_soon(_client, url, burst, rng.randrange(1 << 30), tally, args.writes)
            totals["bursts"] += 1
            await anyio.sleep(rng.uniform(0, args.max_idle))
        await anyio.sleep(args.interval - (time.monotonic() - start) % args.interval + 0.5)
        reporting.cancel_scope.cancel()
    return {"samples": samples, "totals": totals, "elapsed": time.monotonic() - start}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load (default 600)")
    parser.add_argument("--clients", type=int, default=16, help="most clients in one burst (default 16)")
    parser.add_argument("--interval", type=float, default=30.0, help="seconds between reports (default 30)")
    parser.add_argument("--max-idle", type=float, default=15.0, help="longest pause between bursts (default 15)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--writes", type=float, default=0.55,
                        help="share of calls that write (default 0.55; 0: recall only, the store keeps its size)")
    parser.add_argument("--fill", type=int, default=0,
                        help="learn this many distinct memories before the load (for a constant-size soak)")
    args = parser.parse_args()
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="robotmem-soak-") as home:
        server = start_http_server(Path(home))
        try:
            result = anyio.run(soak, server.url, server.process.pid, args)
        finally:
            stop_http_server(server)
    samples, totals = result["samples"], result["totals"]
    files = [f for f, _ in samples]
    rss = [r for _, r in samples]
    settled = samples[1:] or samples  # the first interval includes loading the model
    print(f"\n{totals['calls']} calls in {totals['bursts']} bursts over {result['elapsed']:.0f} s "
          f"({totals['calls'] / result['elapsed']:.1f} calls/s overall), {totals['errors']} errors")
    print(f"open files: first {files[0]}, max {max(files)}, last {files[-1]}")
    print(f"RSS MB: first {rss[0]:.1f}, after the first interval {settled[0][1]:.1f}, max {max(rss):.1f}, "
          f"last {rss[-1]:.1f}")
    grew = files[-1] > settled[0][0] + 8
    return 1 if totals["errors"] or grew else 0


if __name__ == "__main__":
    raise SystemExit(main())
