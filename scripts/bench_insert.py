"""Bulk insert and learn, this tree against a reference tree (e.g. main) in the same run.

Each run is a fresh process writing a fresh store with ``save_perceptions`` in batches of
1,000, the record shape and precomputed vectors of scripts/bench_recall.py (the embedder
returns the vectors it is given, so embedding costs nothing), then timing 200 ``learn``
calls (excluding embedding) on the filled store. With ``--against`` the reference tree
runs the same records alternately with this one, so both see the same machine load.
``--writer both`` runs this tree twice per round, through ``save_perceptions`` and through
``Memory.bulk_writer()`` (each batch committed while the next is prepared), alternately.

    python scripts/bench_insert.py --rows 100000 [--against /work/main] [--rounds 2] [--dir /tmp/robotmem-insert]
    python scripts/bench_insert.py --rows 100000 --writer both --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
BATCH = 1000
#: Batches drawn at a time, then written with the clock running.
CHUNK = 10


def child(db: Path, rows: int, writer: str = "save_perceptions") -> None:
    sys.path.insert(0, str(HERE))
    from bench_recall import CENTRES, DIM, WORDS, BenchVectors, clustered, record

    from robotmem import Memory

    for old in db.parent.glob(db.name + "*"):
        old.unlink()
    centres = np.random.default_rng(0).standard_normal((CENTRES, DIM)).astype(np.float32)
    rng = np.random.default_rng(rows)
    embedder = BenchVectors()
    wall = cpu = 0.0
    marks: dict[str, float] = {}
    with Memory(db, embedder=embedder) as mem:
        bulk = mem.bulk_writer() if writer == "bulk_writer" else None
        save = mem.save_perceptions if bulk is None else bulk.save_perceptions
        for first in range(0, rows, CHUNK * BATCH):
            # Drawn before the clock starts (0.6 ms a record, more than writing it), a chunk at a time;
            # the chunk's last commit is waited for inside it, so no commit runs while records are drawn.
            chunk = [(clustered(rng, centres, BATCH), [record(i, rows, rng) for i in range(start, start + BATCH)])
                     for start in range(first, min(first + CHUNK * BATCH, rows), BATCH)]
            w, c = time.perf_counter(), time.process_time()
            for vectors, records in chunk:
                embedder.batch = vectors
                save(records)
            if bulk is not None:
                bulk.flush()
            wall += time.perf_counter() - w
            cpu += time.process_time() - c
            done = first + len(chunk) * BATCH
            if done in (10_000, rows // 2, rows):
                marks[f"{done:,}"] = done / wall
        if bulk is not None:
            bulk.close()
        learn = []
        for i in range(200):
            embedder.next = clustered(rng, centres, 1)[0]
            t = time.perf_counter()
            mem.learn(f"bench insight {i} {WORDS[i]} {WORDS[i + 7]}", {"task": {"batch": -1, "i": i}})
            learn.append(time.perf_counter() - t)
    print(json.dumps({"records_per_s": rows / wall, "cpu_us_per_record": cpu / rows * 1e6, "marks": marks,
                      "learn_p50_ms": float(np.percentile(learn, 50)) * 1000,
                      "learn_p95_ms": float(np.percentile(learn, 95)) * 1000,
                      "load": os.getloadavg()[0]}))


def run(tree: Path, db: Path, rows: int, writer: str = "save_perceptions") -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, __file__, "--child", str(db), str(rows), writer], env=env,
                         capture_output=True, text=True, check=True)
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:5])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--against", type=Path, help="a reference tree (e.g. /work/main) run alternately")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/robotmem-insert"))
    parser.add_argument("--writer", choices=["save_perceptions", "bulk_writer", "both"], default="save_perceptions",
                        help="how this tree writes (--against always uses save_perceptions)")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; "
          f"{args.rows:,} records in batches of {BATCH:,}, then 200 learns")
    # name -> (tree, writer)
    trees = {"this tree": (HERE.parent, "bulk_writer" if args.writer == "bulk_writer" else "save_perceptions")}
    if args.writer == "both":
        trees["bulk_writer"] = (HERE.parent, "bulk_writer")
    if args.against is not None:
        trees["reference"] = (args.against.resolve(), "save_perceptions")
    for r in range(args.rounds):
        names = list(trees) if r % 2 == 0 else list(reversed(trees))
        for name in names:
            tree, writer = trees[name]
            res = run(tree, args.dir / f"{name.replace(' ', '_')}-{os.getpid()}.db", args.rows, writer)
            marks = ", ".join(f"{k}: {v:,.0f}/s" for k, v in res["marks"].items())  # type: ignore[attr-defined]
            print(f"round {r + 1} {name:<10} ({tree}, {writer}): bulk {res['records_per_s']:,.0f} records/s "
                  f"(cumulative at {marks}), CPU {res['cpu_us_per_record']:.0f} us/record; "
                  f"learn p50 {res['learn_p50_ms']:.2f} ms, p95 {res['learn_p95_ms']:.2f} ms; "
                  f"load average {res['load']:.1f}", flush=True)
    for name in trees:
        for old in args.dir.glob(f"{name.replace(' ', '_')}-{os.getpid()}.db*"):
            old.unlink()


if __name__ == "__main__":
    main()
