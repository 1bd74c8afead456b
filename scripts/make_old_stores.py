"""Write the old-store test fixtures with the old robotmem itself (tests/fixtures/old_stores/).

Each fixture is a store written through the public API of an old commit of this repository, checked
out into a temporary git worktree (never hand-written SQL pretending to be old):

* ``sqlite_b439e3e.db.gz``: the first robotmem with a store (SQLite schema version 1);
* ``postgres_17009b1.sql.gz``: the first with PostgreSQL (schema version 1), as ``pg_dump --inserts``
  of the database it wrote (a pgserver started here, or ``--url`` of an empty database).

    python scripts/make_old_stores.py            # both, into tests/fixtures/old_stores/

tests/robotmem/store/test_upgrade_old_stores.py opens them with this tree.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "old_stores"
SQLITE_COMMIT = "b439e3e"
POSTGRES_COMMIT = "17009b1"

# Run by the old robotmem: only calls its public API had then (Memory, learn, save_perception,
# start_session, end_session, update, forget). Contexts hold what later migrations rewrite: part
# numbers (full-text identifiers), a text NFKC folds (10⁶), -0.0, points, outcomes.
WRITER = r'''
import sys
from robotmem import Memory
target = sys.argv[1]
mem = Memory(url=target, collection="lab") if target.startswith("postgres") else Memory(target, collection="lab")
clock = [1_700_000_000.0]
def tick():
    clock[0] += 37.25
    return clock[0]
mem._clock = tick
s1 = mem.start_session(collection="lab", context={"robot": {"name": "arm-1"}, "task": {"name": "pick"}})["session_id"]
s2 = mem.start_session(collection="lab", context={"robot": {"name": "arm-2"}})["session_id"]
s3 = mem.start_session(collection="yard", context={"robot": {"name": "cart"}})["session_id"]
ids = []
facts = [
    ("grip_force=12.5N holds the wet glass", {"tag": "t1", "params": {"grip_force": {"value": 12.5}}}),
    ("part SN-4711A needs 3.5 Nm torque", {"tag": "t2", "part": "SN-4711A", "fw": "v2.3.1"}),
    ("lifetime is 10\u2076 cycles", {"tag": "t3", "zero": -0.0, "one": 1.0}),
    ("goal reached near the shelf", {"tag": "t4", "pose": {"x": 1.5, "y": -2.0}}),
    ("\u62d3\u5c55 gripper \u5939\u722a slips", {"tag": "t5", "note": "\u00e9t\u00e9"}),
    ("safety: never exceed 2 m/s", {"tag": "t6", "category": "safety"}),
]
for i, (text, ctx) in enumerate(facts):
    ids.append(mem.learn(text, ctx, session_id=s1 if i % 2 == 0 else s2)["memory_id"])
mem.learn(facts[0][0], facts[0][1], session_id=s1)  # an exact repeat reinforces
for i in range(24):
    mem.save_perception(f"joint trace {i} of unit U-{100 + i}", "proprioceptive",
                        data={"joints": [j * 0.5 + i for j in range(7)], "ok": i % 2 == 0},
                        metadata={"tag": "p", "unit": f"U-{100 + i}", "pose": {"x": float(i), "y": float(-i)}},
                        session_id=s1 if i < 12 else s3)
mem.learn("loose fact outside any episode", {"tag": "t7"})
mem.update(ids[1], "part SN-4711A needs 4.0 Nm torque", {"tag": "t2", "part": "SN-4711A", "fw": "v2.4"})
mem.forget(ids[5], "wrong reading")
mem.end_session(s1, 1.0)
mem.end_session(s3, 0.0)
mem.close()
'''


def _write_with(commit: str, target: str) -> None:
    tree = Path(tempfile.mkdtemp(prefix=f"robotmem-{commit}-"))
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), commit], check=True)
    try:
        env = dict(os.environ, PYTHONPATH=str(tree))
        subprocess.run([sys.executable, "-c", WRITER, target], env=env, check=True, cwd=tree)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=True)


def make_sqlite() -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "old.db"
        _write_with(SQLITE_COMMIT, str(path))
        out = OUT / f"sqlite_{SQLITE_COMMIT}.db.gz"
        with open(path, "rb") as src, gzip.GzipFile(out, "wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)
    return out


def make_postgres(url: str | None) -> Path:
    import pgserver  # type: ignore[import-untyped]

    server = None
    if url is None:
        parent = Path(tempfile.mkdtemp(prefix="robotmem-pg-"))
        parent.chmod(0o755)
        server = pgserver.get_server(parent / "data", cleanup_mode="delete")
        url = str(server.get_uri())
    try:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        _write_with(POSTGRES_COMMIT, url)
        pg_dump = Path(pgserver.__file__).parent / "pginstall" / "bin" / "pg_dump"
        dump = subprocess.run([str(pg_dump), "--inserts", "--no-owner", "--no-privileges",
                               "--dbname", url], check=True, capture_output=True).stdout
        out = OUT / f"postgres_{POSTGRES_COMMIT}.sql.gz"
        with gzip.GzipFile(out, "wb", mtime=0) as dst:
            dst.write(dump)
        return out
    finally:
        if server is not None:
            server.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["sqlite", "postgres"])
    parser.add_argument("--url", help="an empty PostgreSQL database (default: start a pgserver)")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.only != "postgres":
        print(make_sqlite())
    if args.only != "sqlite":
        print(make_postgres(args.url))


if __name__ == "__main__":
    main()
