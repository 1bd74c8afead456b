"""Import (and migration 19) timings, this tree against a reference tree in the same run.

For each size: a source store of that many memories (perceptions with a small payload, a
tenth of them sharing their description with others, as a sensor's samples do, plus 200
facts) is written and exported once by this tree. Then each tree, in a fresh process:

* imports the export into an empty store (``empty``), then again into the same store
  (``again``: every record already there), then an export of 1,000 other perceptions
  (``1k into full``);
* meanwhile another process saves one perception every 50 ms, as a robot would; its save
  times (median, 99th percentile, slowest) and failures are reported (``robot``).

The reference tree's import scanned the collection for every record, so it runs only up to
``--against-max`` memories. ``--migration N`` times migration 19 on an N-memory store (the
store rewound to version 18: the uid column, its index and import_links dropped).
``--forward-links K``: the first K memories of the source absorb one of the last K each, so
their links wait in ``import_links`` for most of the import (as a fact that absorbed later
episodes' notes over months does).

    python scripts/bench_import.py --sizes 20000 100000 [--against /tmp/main-tree] [--against-max 20000]
    python scripts/bench_import.py --sizes 100000 --forward-links 20000 --against /tmp/main-tree --against-max 100000
    python scripts/bench_import.py --migration 100000 [--url postgresql://...  (an empty database)]
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

HERE = Path(__file__).resolve().parent
TREE = HERE.parent


def _records(n: int, offset: int = 0) -> list[dict]:
    out = []
    for i in range(offset, offset + n):
        same = i % 10 == 0  # a tenth share one description and metadata, as repeated sensor samples do
        out.append({"description": "joint state sample from /joint_states" if same
                    else f"camera frame {i} of the shelf, cup {i % 97} near bin {i % 13}",
                    "perception_type": "proprioceptive" if same else "visual",
                    "metadata": {"robot": {"id": f"r{i % 3}"}, "task": {"name": "pick"}},
                    "data": {"q": [round(0.001 * i, 6)] * 6}, "occurred_at": 1_700_000_000 + i, "embed": False})
    return out


def _fresh(path: Path) -> None:
    for old in path.parent.glob(path.name + "*"):
        old.unlink()


def make_source(folder: Path, n: int, links: int = 0) -> Path:
    from robotmem import Memory

    export = folder / f"source{n}{f'-links{links}' if links else ''}.jsonl"
    if export.exists():
        return export
    db = folder / f"source{n}.db"
    _fresh(db)
    with Memory(db, embedder=None) as mem:
        with mem.bulk_writer() as writer:
            for start in range(0, n - 200, 1000):
                writer.save_perceptions(_records(min(1000, n - 200 - start), start))
        for i in range(200):
            mem.learn(f"grip force {i % 50} N holds cup {i}", {"params": {"grip_force": i % 50}})
    if links:
        _absorb_forward(db, links)
    with Memory(db, embedder=None) as mem:
        mem.export(export)
    small = folder / "small.jsonl"
    if not small.exists():
        db = folder / "small.db"
        _fresh(db)
        with Memory(db, embedder=None) as mem:
            mem.save_perceptions(_records(1000, 10_000_000))
            mem.export(small)
    return export


def _absorb_forward(db: Path, links: int) -> None:
    import apsw

    conn = apsw.Connection(str(db))
    ids = [int(i) for (i,) in conn.execute("SELECT id FROM memories ORDER BY id")]
    with conn:
        conn.executemany("UPDATE memories SET absorbed = ? WHERE id = ?",
                         [(json.dumps([ids[-1 - j]]), ids[j]) for j in range(links)])
    conn.close()


def child(folder: Path, n: int, links: int = 0) -> None:
    """In a fresh process of the tree under test."""
    from robotmem import Memory

    db = folder / f"target{n}.db"
    _fresh(db)
    result: dict = {"tree": str(Path(__import__("robotmem").__file__).parents[1])}
    with Memory(db, embedder=None) as mem:
        mem.learn("the store exists before the import")
    stop = folder / "stop"
    stop.unlink(missing_ok=True)
    robot = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--dir", str(folder), "--robot", str(db)],
                             stdout=subprocess.PIPE, text=True)
    time.sleep(1.0)  # the robot's store is open and writing
    with Memory(db, embedder=None) as mem:
        try:
            source = make_source(folder, n, links)
            for name, path in (("empty", source), ("again", source),
                               ("1k into full", folder / "small.jsonl")):
                t = time.perf_counter()
                counts = mem.import_(path)
                result[name] = {"s": round(time.perf_counter() - t, 2), "memories": counts["memories"],
                                "skipped": counts["skipped"]}
        finally:
            stop.touch()
            out, _ = robot.communicate()
    result["robot"] = json.loads(out)
    print(json.dumps(result))


def robot_writes(folder: Path, db: Path) -> None:
    """Another process: one perception every 50 ms until the stop file appears; its save times."""
    from robotmem import Memory

    times: list[float] = []
    failed = 0
    with Memory(db, embedder=None) as own:
        while not (folder / "stop").exists():
            t = time.perf_counter()
            try:
                own.save_perceptions([{"description": f"robot frame {len(times)}", "embed": False}])
                times.append((time.perf_counter() - t) * 1000)
            except Exception:
                failed += 1
            time.sleep(0.05)
    times.sort()
    print(json.dumps({"saves": len(times), "failed": failed, "median ms": round(times[len(times) // 2], 1),
                      "p99 ms": round(times[int(len(times) * 0.99)], 1), "max ms": round(times[-1], 1)}))


def migration(folder: Path, n: int, url: str | None = None) -> None:
    """Migration 19 (SQLite) or 4 (PostgreSQL, ``url``) on a store of ``n`` memories rewound to before it."""
    from robotmem import Memory

    location: str | Path = url or folder / f"migration{n}.db"
    if url is None:
        _fresh(Path(location))
    with Memory(location, embedder=None) as mem:
        with mem.bulk_writer() as writer:
            for start in range(0, n, 1000):
                writer.save_perceptions(_records(min(1000, n - start), start))
    if url is None:
        import apsw

        conn = apsw.Connection(str(location))
        conn.execute("DROP INDEX memories_by_uid; DROP TABLE import_links; ALTER TABLE memories DROP COLUMN uid; "
                     "PRAGMA user_version=18; VACUUM")
        conn.close()
    else:
        import psycopg

        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("ALTER TABLE memories DROP COLUMN uid")
            admin.execute("DROP TABLE import_links")
            admin.execute("DELETE FROM robotmem_schema WHERE version >= 4")
            admin.execute("VACUUM FULL memories")
    t = time.perf_counter()
    with Memory(location, embedder=None) as mem:
        count = mem.stats()["collections"]["default"]["by_status"]["active"]
    print(json.dumps({"migration": "4 (PostgreSQL)" if url else "19 (SQLite)", "memories": count,
                      "s": round(time.perf_counter() - t, 2)}))


def _machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    return (f"{platform.machine()}, {os.cpu_count()} cores ({model}), Python {platform.python_version()}, "
            f"load {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[])
    parser.add_argument("--against", type=Path, help="a reference tree (e.g. a checkout of main)")
    parser.add_argument("--against-max", type=int, default=20_000)
    parser.add_argument("--forward-links", type=int, default=0, help="links that wait for most of the import")
    parser.add_argument("--migration", type=int)
    parser.add_argument("--url", help="--migration on this (empty) PostgreSQL database instead of a SQLite file")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/robotmem-import"))
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--robot", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    if args.robot is not None:
        robot_writes(args.dir, args.robot)
        return
    if args.child is not None:
        child(args.dir, args.child, args.forward_links)
        return
    print(_machine())
    if args.migration:
        migration(args.dir, args.migration, args.url)
    for n in args.sizes:
        make_source(args.dir, n, args.forward_links)
        trees = [TREE] + ([args.against] if args.against and n <= args.against_max else [])
        for tree in trees:
            env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
            out = subprocess.run([sys.executable, str(HERE / "bench_import.py"), "--dir", str(args.dir),
                                  "--child", str(n), "--forward-links", str(args.forward_links)], env=env, capture_output=True, text=True, check=True)
            print(n, out.stdout.strip())


if __name__ == "__main__":
    main()
