"""Concurrent throughput: N client processes doing mixed operations on one store.

Each client is its own process with its own ``Memory`` (as N robots or N MCP servers
would be), doing ``--ops`` operations: 40% learn (a tenth of them an insight every
client learns too), 20% save_perception, 40% recall (half filtered by robot.id). No
embedding model (its cost is in bench_embed.py): these are the store's figures.

    python scripts/bench_fleet.py [--clients 8] [--ops 500] [--backend sqlite|postgresql|both] [--url URL]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_postgres import postgres_database

from robotmem import Memory

CLIENT = textwrap.dedent(
    """
    import json, sys, time
    from robotmem import Memory
    location, name, ops = sys.argv[1], sys.argv[2], int(sys.argv[3])
    latencies = {"learn": [], "perceive": [], "recall": []}
    with Memory(location, embedder=None) as mem:
        sid = mem.start_session(context={"robot": {"id": name}})["session_id"]
        for i in range(ops):
            kind = ("learn", "learn", "perceive", "recall", "recall")[i % 5]
            t = time.perf_counter()
            if kind == "learn":
                text = f"shared insight {i % 50}" if i % 10 == 0 else f"{name} learned step {i} grip {i % 17}"
                mem.learn(text, {"robot": {"id": name}, "params": {"grip": i % 17}})
            elif kind == "perceive":
                mem.save_perception(f"{name} saw bin {i}", metadata={"robot": {"id": name},
                                    "spatial": {"p": [i % 11, i % 7]}}, session_id=sid)
            elif i % 2:
                mem.recall(f"grip {i % 17}", context_filter={"robot.id": name}, n=5)
            else:
                mem.recall(f"bin step {i % 13}", n=5)
            latencies[kind].append(time.perf_counter() - t)
        mem.end_session(sid)
    print(json.dumps(latencies))
    """
)


def run(location: str, clients: int, ops: int) -> dict[str, float]:
    Memory(location, embedder=None).close()  # schema first, outside the timing
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", CLIENT, location, f"robot{c}", str(ops)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in range(clients)]
    results = []
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"a client failed:\n{err[-3000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    wall = time.perf_counter() - start
    figures = {"ops_per_s": clients * ops / wall, "wall_s": wall}
    for kind in ("learn", "perceive", "recall"):
        samples = sorted(x for r in results for x in r[kind])
        figures[f"{kind}_p50_ms"] = samples[len(samples) // 2] * 1000
        figures[f"{kind}_p95_ms"] = samples[int(len(samples) * 0.95)] * 1000
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--ops", type=int, default=500)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--url", default=os.environ.get("ROBOTMEM_BENCH_POSTGRES_URL"))
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, python {platform.python_version()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}; {args.clients} client processes x {args.ops} operations")
    for backend in (["sqlite", "postgresql"] if args.backend == "both" else [args.backend]):
        if backend == "sqlite":
            with tempfile.TemporaryDirectory() as folder:
                figures = run(str(Path(folder) / "fleet.db"), args.clients, args.ops)
        else:
            with postgres_database(args.url, "robotmem_bench_fleet") as url:
                figures = run(url, args.clients, args.ops)
        print(f"{backend:<10} {figures['ops_per_s']:7.0f} ops/s  (wall {figures['wall_s']:.1f} s)   " + "   ".join(
            f"{k} p50 {figures[k + '_p50_ms']:.1f} ms p95 {figures[k + '_p95_ms']:.1f} ms"
            for k in ("learn", "perceive", "recall")))


if __name__ == "__main__":
    main()
