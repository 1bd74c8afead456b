"""The embedded store works in full without the [postgres] extra.

The test environment installs psycopg and pgvector (the PostgreSQL tests need them), so an
import of them on a SQLite code path would pass every other test and still crash a user who
installed robotmem the way README says. Here they are made unimportable in a fresh
interpreter, every module outside the PostgreSQL backend is imported, and every operation
runs on a SQLite store, through the Python API and through the CLI.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent("""
    import importlib, importlib.abc, json, pkgutil, sys

    class Absent(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("psycopg", "psycopg_binary", "psycopg_pool", "pgvector"):
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None

    sys.meta_path.insert(0, Absent())

    import robotmem
    POSTGRES_ONLY = ("robotmem.store.postgres", "robotmem.search.postgres", "robotmem.search.outcomes_postgres")
    for info in pkgutil.walk_packages(robotmem.__path__, "robotmem."):
        if not info.name.startswith(POSTGRES_ONLY):
            importlib.import_module(info.name)

    from robotmem import Memory
    from robotmem.cli.main import main

    db, export = sys.argv[1], sys.argv[2]
    with Memory(db, embedder=None) as mem:
        sid = mem.start_session(context={"task": {"name": "pick"}})["session_id"]
        a = mem.learn("gripper slipped on the wet glass", context={"params": {"grip": 12.5}, "task": {"success": False}},
                      session_id=sid)["memory_id"]
        mem.learn("gripper held the dry glass", context={"params": {"grip": 14.0}, "task": {"success": True}},
                  session_id=sid)
        mem.save_perception("arm at the shelf", perception_type="proprioceptive",
                            metadata={"spatial": {"position": [1.0, 2.0, 0.0]}}, session_id=sid)
        mem.end_session(sid, outcome_score=0.5)
        assert mem.recall("glass slipped", min_relevance=0)["count"] >= 1
        assert mem.recall("", context_filter={"task.success": True})["count"] == 1
        assert mem.recall("", spatial_sort={"field": "spatial.position", "target": [1, 2, 0]})["count"] >= 1
        stats = mem.outcome_stats(group_by="params.grip")
        assert [g["value"] for g in stats["groups"]] == [12.5, 14.0], stats
        mem.update(a, "gripper slipped on the wet glass at 12.5 N")
        mem.forget(a, "retracted")
        mem.consolidate(sid)
        mem.export(export)
        assert mem.stats()["memories"] >= 2
    for argv in (["stats"], ["outcomes", "params.grip"], ["recall", "glass", "--min-relevance", "0"],
                 ["session", "list"], ["consolidate"]):
        code = main(["--db", db, "--json", *argv])
        assert code in (0, None), (argv, code)
    print("ok")
""")


def test_sqlite_store_needs_no_postgres_packages(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "m.db"), str(tmp_path / "out.jsonl")],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
