"""A store's size under a retention purge, day after day, on either backend.

Each simulated day (the service's clock moved on, so months take minutes) one episode of
``--per-day`` perceptions (batches of 250 through ``save_perceptions``, a 64-number float32
payload, a point, a short description; random unit vectors as a stand-in embedder: the store's
size does not depend on the model), ended, then ``purge_perceptions(before=now - keep days)``.
After each day the space is given back as the store would by itself in a day: SQLite a
``wal_checkpoint(TRUNCATE)`` (the checkpoint thread does it 5 s after the last commit),
PostgreSQL a plain ``VACUUM`` (what autovacuum does within a day; not ``VACUUM FULL``). Printed
per day: memories, purged, the purge's time, the store's size (SQLite: the file; PostgreSQL:
``pg_database_size``); on PostgreSQL at the end its largest relations, before and after
rebuilding its two GIN indexes (``REINDEX INDEX CONCURRENTLY``), which keep every key ever
inserted.

    python scripts/bench_purge.py --days 40 --per-day 2000 --keep 3                # SQLite, a temporary file
    python scripts/bench_purge.py --days 40 --per-day 2000 --keep 3 --postgres     # a temporary pgserver
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_postgres import RandomVectors, postgres_database  # noqa: E402

from robotmem import Memory  # noqa: E402

DAY = 86_400.0
START = 1_767_225_600.0  # 2026-01-01 UTC


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def _records(day: int, count: int, session: str, rng: np.random.Generator) -> list[dict]:
    return [{"session_id": session, "description": f"day {day} sample {i}: grip slip at the shelf edge", "perception_type": "tactile",
             "data": rng.standard_normal(64).astype(np.float32),
             "metadata": {"spatial": {"object_position": [float(x) for x in rng.uniform(-5, 5, size=3)]},
                          "robot": {"id": "arm-1"}}}
            for i in range(count)]


def _size(mem: Memory, target: str, postgres: bool) -> float:
    if postgres:
        import psycopg

        with psycopg.connect(target, autocommit=True) as admin:
            admin.execute("VACUUM")
            return float(admin.execute("SELECT pg_database_size(current_database())").fetchone()[0])  # type: ignore[index]
    mem._db.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")  # noqa: SLF001 - the bench measures the file
    return float(Path(target).stat().st_size)


def run(target: str, *, days: int, per_day: int, keep: int, postgres: bool) -> None:
    rng = np.random.default_rng(7)
    clock = Clock()
    with Memory(target, embedder=RandomVectors(), clock=clock) as mem:
        print(f"{'day':>4} {'memories':>9} {'purged':>7} {'purge s':>8} {'size MB':>8}", flush=True)
        for day in range(1, days + 1):
            session = mem.start_session(context={"robot": {"id": "arm-1"}})["session_id"]
            for start in range(0, per_day, 250):
                mem.save_perceptions(_records(day, min(250, per_day - start), session, rng))
                clock.now += DAY / (per_day / 250 + 1)
            mem.end_session(session)
            clock.now = START + day * DAY
            began = time.perf_counter()
            purged = mem.purge_perceptions(before=clock.now - keep * DAY)
            took = time.perf_counter() - began
            count = mem.stats()["memories"]
            print(f"{day:>4} {count:>9,} {purged['purged']:>7,} {took:>8.2f} {_size(mem, target, postgres) / 1e6:>8.2f}",
                  flush=True)
        if postgres:
            _largest(target)
            _reindex(target)
            _largest(target)


def _reindex(url: str) -> None:
    """GIN indexes never remove a key (PostgreSQL's src/backend/access/gin/README): a context value
    or word no live memory holds stays. What rebuilding them gives back, and what it takes."""
    import psycopg

    began = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("REINDEX INDEX CONCURRENTLY memories_context")
        admin.execute("REINDEX INDEX CONCURRENTLY memories_fulltext_live")
        size = admin.execute("SELECT pg_database_size(current_database())").fetchone()[0]  # type: ignore[index]
    print(f"after REINDEX CONCURRENTLY of the two GIN indexes ({time.perf_counter() - began:.2f} s): "
          f"{size / 1e6:.2f} MB")


def _largest(url: str) -> None:
    """The largest tables and indexes at the end: where what stays of the purged days lies."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        rows = admin.execute("SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n "
                             "ON n.oid = c.relnamespace WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') "
                             "AND c.relkind IN ('r', 'i', 't') ORDER BY 2 DESC LIMIT 8").fetchall()
    print("largest: " + ", ".join(f"{name} {size / 1e6:.2f} MB" for name, size in rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=40)
    parser.add_argument("--per-day", type=int, default=2000)
    parser.add_argument("--keep", type=int, default=3, help="days of perceptions kept")
    parser.add_argument("--postgres", action="store_true", help="on a temporary pgserver (PostgreSQL 16 + pgvector)")
    args = parser.parse_args()
    print(f"{platform.machine()}, Python {platform.python_version()}, "
          f"{'PostgreSQL' if args.postgres else 'SQLite'}, {args.per_day:,} a day, {args.keep} days kept")
    if args.postgres:
        with postgres_database(None, "purge") as url:
            run(url, days=args.days, per_day=args.per_day, keep=args.keep, postgres=True)
    else:
        with tempfile.TemporaryDirectory() as folder:
            run(str(Path(folder) / "memory.db"), days=args.days, per_day=args.per_day, keep=args.keep, postgres=False)


if __name__ == "__main__":
    main()
