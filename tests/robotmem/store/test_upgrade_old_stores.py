"""Stores the first robotmem wrote (fixtures made by scripts/make_old_stores.py with that code itself),
opened by this one: every row reads back as the old store held it, on SQLite and PostgreSQL, and an
upgrade killed midway keeps what it committed."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import apsw
import pytest

from robotmem import Memory

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "old_stores"
_databases = count(1)

#: The first migration that rewrites memories' search text, by backend: the upgrade's killed child is
#: caught once rows it rewrote are committed while the store is still below that version.
FIRST_REWRITE = {"sqlite": 5, "postgresql": 3}


@pytest.fixture(params=["sqlite", "postgresql"])
def old_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(backend, path or URL) of a store the first robotmem of that backend wrote."""
    if request.param == "sqlite":
        path = tmp_path / "old.db"
        path.write_bytes(gzip.decompress((FIXTURES / "sqlite_b439e3e.db.gz").read_bytes()))
        yield "sqlite", str(path)
        return
    import psycopg

    server = request.getfixturevalue("postgres_server_url")
    name = f"old_{os.getpid()}_{next(_databases)}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = urlsplit(server)._replace(path=f"/{name}").geturl()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(gzip.decompress((FIXTURES / "postgres_17009b1.sql.gz").read_bytes()).decode())
    yield "postgresql", url
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


def _raw(backend: str, target: str) -> dict[str, Any]:
    """The store's rows read with plain SQL, not through robotmem."""
    if backend == "sqlite":
        conn = apsw.Connection(target)
        conn.setbusytimeout(10_000)  # the upgrading process may be switching the file to WAL
        try:
            def rows(sql: str) -> list[dict[str, Any]]:
                cur = conn.execute(sql)
                names = [d[0] for d in cur.getdescription()]
                return [dict(zip(names, r)) for r in cur]
            memories = rows("SELECT *, json(context) AS context FROM memories ORDER BY id")
            sessions = rows("SELECT *, json(context) AS context FROM sessions ORDER BY id")
            payloads = {m: bytes(d) for m, d in conn.execute("SELECT memory_id, data FROM payloads")}
            vectors = {m: bytes(v) for m, v in conn.execute("SELECT memory_id, vector FROM embeddings")}
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        finally:
            conn.close()
        for row in memories + sessions:
            row["context"] = json.loads(row["context"])
    else:
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(target, row_factory=dict_row) as conn:
            memories = conn.execute("SELECT * FROM memories ORDER BY id").fetchall()
            sessions = conn.execute("SELECT * FROM sessions ORDER BY id").fetchall()
            payloads = {r["memory_id"]: bytes(r["data"]) for r in conn.execute("SELECT memory_id, data FROM payloads")}
            vectors = {r["memory_id"]: r["v"] for r in conn.execute("SELECT memory_id, vector::text AS v FROM embeddings")}
            version = conn.execute("SELECT max(version) AS v FROM robotmem_schema").fetchone()["v"]  # type: ignore[index]
    return {"memories": memories, "sessions": sessions, "payloads": payloads, "vectors": vectors, "version": version}


def _open(backend: str, target: str) -> Memory:
    return Memory(url=target, embedder=None) if backend == "postgresql" else Memory(target, embedder=None)


def _expected_context(backend: str, row: dict[str, Any]) -> Any:
    context = json.loads(json.dumps(row["context"]))
    outcome = context.get("episode", {}).get("outcome")
    if backend == "postgresql" and row["session_id"] and isinstance(outcome, int):
        context["episode"]["outcome"] = float(outcome)  # PostgreSQL migration 6 (docs/data-model.md)
    return context


def _assert_reads_back(backend: str, target: str, before: dict[str, Any]) -> None:
    """What this robotmem returns is what the old store held, field by field; nothing lost or doubled."""
    after = _raw(backend, target)
    assert [m["id"] for m in after["memories"]] == [m["id"] for m in before["memories"]]
    assert after["payloads"] == before["payloads"] and after["vectors"] == before["vectors"]
    with _open(backend, target) as mem:
        for row in before["memories"]:
            got = mem.get(row["id"])
            for field in ("collection", "session_id", "type", "perception_type", "content", "status",
                          "superseded_by", "evidence_count", "created_at", "occurred_at"):
                assert got[field] == row[field], (row["id"], field)
            assert got["context"] == _expected_context(backend, row), row["id"]
        unit = next(m for m in before["memories"] if m["content"].startswith("joint trace 3 "))
        assert mem.get_data(unit["id"]) == {"joints": [j * 0.5 + 3 for j in range(7)], "ok": False}
        listed = {s["session_id"]: s for s in mem.list_sessions()}
        assert sorted(listed) == sorted(s["id"] for s in before["sessions"])
        for session in before["sessions"]:
            assert {k: listed[session["id"]][k] for k in ("collection", "started_at", "ended_at", "outcome_score")} \
                == {k: session[k] for k in ("collection", "started_at", "ended_at", "outcome_score")}
        for collection in ("lab", "yard"):
            for tag in ("t1", "t2", "t3", "t6", "p"):
                want = {m["id"] for m in before["memories"] if m["collection"] == collection
                        and m["context"].get("tag") == tag and m["status"] == "active"}
                hits = mem.recall("", collection=collection, n=100, min_confidence=0, context_filter={"tag": tag})
                assert {h["id"] for h in hits["results"]} == want, (collection, tag)
        # Identifiers that live only in a context are found by text once the store is upgraded.
        unit_hits = mem.recall("U-107", collection="lab", n=5, min_confidence=0)["results"]
        assert [h["content"] for h in unit_hits][:1] == ["joint trace 7 of unit U-107"]
        live = sum(m["status"] in ("active", "archived") for m in before["memories"])
        assert mem.stats()["memories"] == live


def test_a_store_the_first_robotmem_wrote_reads_back_as_it_was(old_store: tuple[str, str]):
    backend, target = old_store
    before = _raw(backend, target)
    assert before["version"] == 1 and len(before["memories"]) == 31
    _assert_reads_back(backend, target, before)


# The child upgrades the store with pages of 2 rows and waits a little after each commit, so that
# the parent, reading the store on a connection of its own, sees what each commit left.
_UPGRADE = r"""
import sys, time
try:
    import robotmem.store.paging as paging
    paging.PAGE_ROWS = 2
except ImportError:  # a robotmem before pages: the test then shows what it lacks
    pass
if sys.argv[1] == "sqlite":
    import robotmem.store.connection as c
    commit = c._commit
    def slow(conn):
        commit(conn)
        time.sleep(0.3)
    c._commit = slow
else:
    from robotmem.store.postgres.connection import PgDatabase
    commit = PgDatabase._commit
    def slow(self, *a, **k):
        commit(self, *a, **k)
        time.sleep(0.3)
    PgDatabase._commit = slow
from robotmem import Memory
Memory(url=sys.argv[2], embedder=None).close() if sys.argv[1] == "postgresql" else Memory(sys.argv[2], embedder=None).close()
"""


def test_an_upgrade_killed_midway_keeps_the_pages_it_committed(old_store: tuple[str, str]):
    """A robot killed while it upgrades (a watchdog, the OOM killer, a power cut) loses at most the
    page it was writing: in one transaction, a store too large to upgrade between two kills never
    got upgraded. Reopened, the upgrade finishes and every memory reads back as it was."""
    backend, target = old_store
    before = _raw(backend, target)
    text_before = {m["id"]: m["search_text"] for m in before["memories"]}
    child = subprocess.Popen([sys.executable, "-c", _UPGRADE, backend, target])
    seen: tuple[int, int] | None = None
    try:
        while child.poll() is None:
            now = _raw(backend, target)
            rewritten = sum(m["search_text"] != text_before[m["id"]] for m in now["memories"])
            if rewritten and now["version"] < FIRST_REWRITE[backend]:
                child.send_signal(signal.SIGKILL)
                child.wait()
                seen = (now["version"], rewritten)
                break
            time.sleep(0.02)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    # Rows one step rewrote were committed before the step ended: the upgrade went by pages.
    assert seen is not None, "no committed page of a step was seen before the upgrade ended"
    version, rewritten = seen
    assert version == FIRST_REWRITE[backend] - 1 and 0 < rewritten < len(before["memories"])
    after_kill = _raw(backend, target)
    assert after_kill["version"] == version
    assert [m["id"] for m in after_kill["memories"]] == [m["id"] for m in before["memories"]]
    _assert_reads_back(backend, target, before)
