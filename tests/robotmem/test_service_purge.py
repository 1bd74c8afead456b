"""Memory.purge_perceptions: old perceptions deleted for good, every row of them, on both backends.

The oracle is plain SQL over every table of the store, read before and after: the rows of the
memories the test expects gone (known from how it filled the store, not from the purge's own
rule) are absent afterwards, and every other row is as it was; the counts stats reads equal a
recount; recall answers as before, less the purged memories.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from robotmem import Memory, NotFoundError, ValidationError
from robotmem.store import purge
from robotmem.store.points import memory_of_point


REPO = Path(__file__).resolve().parents[2]
DAY = 86_400.0


class Filled:
    def __init__(self) -> None:
        self.old: dict[str, list[int]] = {"arm": [], "base": []}  # perceptions the purge takes
        self.kept: list[int] = []  # old ones it must keep
        self.cutoff = 0.0
        self.session = ""


def _fill(mem: Memory, clock: Any) -> Filled:
    f = Filled()
    f.session = mem.start_session(collection="arm")["session_id"]
    for i in range(24):
        r = mem.save_perception(f"gripper saw red block {i} on the table", data=[float(i)] * 8,
                                metadata={"spatial": {"p": [float(i), float(i % 5)]}, "task": {"step": i}},
                                session_id=f.session)
        f.old["arm"].append(r["memory_id"])
        clock.advance(60)
    shelf = {f"k{j}": [float(j), 1.0] for j in range(70)}  # more than 64 points: the overflow range
    f.old["arm"].append(mem.save_perception("shelf scan of every slot", metadata={"spatial": {"shelf": shelf}},
                                            session_id=f.session)["memory_id"])
    gone = mem.save_perception("a blurry frame of the red block", session_id=f.session)["memory_id"]
    mem.forget(gone, "blurry")
    f.old["arm"].append(gone)
    # protected (a safety note): never merged or decayed, so no retention rule takes it either
    f.kept.append(mem.save_perception("force spike of 60 N on the left finger: stop", session_id=f.session,
                                      metadata={"category": "safety"})["memory_id"])
    f.kept.append(mem.save_perception("episode summary: red block moved", perception_type="procedural",
                                      session_id=f.session)["memory_id"])
    fact = mem.learn("the red block weighs 200 g", collection="arm")["memory_id"]
    f.kept.append(fact)
    target = mem.save_perception("tactile reading of the red block", perception_type="tactile",
                                 collection="arm")["memory_id"]
    f.kept.append(target)  # named by another memory's superseded_by: stays
    old_fact = mem.learn("the red block weighs about 200 grams", collection="arm")["memory_id"]
    with mem.store.write() as conn:
        conn.execute("UPDATE memories SET status = 'superseded', superseded_by = ? WHERE id = ?", (target, old_fact))
    f.kept.append(old_fact)
    mem.end_session(f.session)
    for i in range(10):
        f.old["base"].append(mem.save_perception(f"base lidar sweep {i} near the dock", collection="base",
                                                 metadata={"spatial": {"p": [float(i), 2.0]}})["memory_id"])
    clock.advance(DAY)
    f.cutoff = clock.now
    clock.advance(1)
    s2 = mem.start_session(collection="arm")["session_id"]
    for i in range(8):
        mem.save_perception(f"gripper saw red block {i} again", data=[1.0, 2.0],
                            metadata={"spatial": {"p": [float(i), 0.5]}, "task": {"step": i}}, session_id=s2)
        mem.save_perception(f"base lidar sweep {i} at the charger", collection="base",
                            metadata={"spatial": {"p": [float(i), 3.0]}})
        clock.advance(60)
    mem.learn("the dock is north of the charger", collection="base")
    return f


def _tables(conn: Any, kind: str) -> list[str]:
    if kind == "postgresql":
        return [str(t) for (t,) in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
            "AND table_type = 'BASE TABLE'").fetchall()]
    names = [str(n) for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()]
    shadow = ("_node", "_rowid", "_parent", "_data", "_idx", "_docsize", "_config", "_content")
    return [n for n in names if not n.startswith("sqlite_") and not n.endswith(shadow) and n != "memories_fts"]


def _columns(conn: Any, kind: str, table: str) -> list[str]:
    if kind == "postgresql":
        return [str(c) for (c,) in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = ? ORDER BY ordinal_position", (table,)).fetchall()]
    return [str(row[1]) for row in conn.execute(f"PRAGMA table_xinfo({table})").fetchall()]


def _owner(table: str, row: dict[str, Any]) -> int | None:
    """The memory a row belongs to (None: no memory's)."""
    if table == "memories":
        return int(row["id"])
    if table.startswith("spatial_points_e"):
        return memory_of_point(int(row["id"]))
    value = row.get("memory_id")
    return None if value is None else int(value)


def _dump(mem: Memory) -> dict[str, list[tuple[int | None, str]]]:
    """Every row of every table as (its memory, text), and the full-text index's documents."""
    out: dict[str, list[tuple[int | None, str]]] = {}
    with mem.store.read() as conn:
        for table in _tables(conn, mem.store.kind):
            names = _columns(conn, mem.store.kind, table)
            rows = [dict(zip(names, r)) for r in conn.execute(f"SELECT {', '.join(names)} FROM {table}").fetchall()]
            out[table] = sorted((_owner(table, r), repr(sorted((k, repr(v)) for k, v in r.items()))) for r in rows)
        if mem.store.kind == "sqlite":
            conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_docs USING fts5vocab(main, memories_fts, 'instance')")
            out["memories_fts(index)"] = sorted((int(d), "") for (d,) in conn.execute(
                "SELECT DISTINCT doc FROM temp.fts_docs").fetchall())
    return out


#: Kept by triggers (checked against a recount instead) or appended to by every delete.
_DERIVED = {"memory_counts", "embedding_counts", "payload_counts", "change_log", "change_log_floor",
            "memories_fts_vocab"}  # the vocabulary: document frequencies of the full-text index


def _check_oracle(before: dict[str, Any], after: dict[str, Any], purged: set[int]) -> None:
    assert set(before) == set(after)
    for table in before:
        if table in _DERIVED:
            continue
        expected = [r for r in before[table] if r[0] not in purged]
        assert after[table] == expected, table
    assert any(owner in purged for t in ("memories", "payloads", "points", "context_leaves", "spatial_points",
                                          "memories_fts(index)") for owner, _ in before.get(t, []))


def _check_counts(mem: Memory) -> None:
    with mem.store.read() as conn:
        recount = {(c, t, s): int(n) for c, t, s, n in conn.execute(
            "SELECT collection, type, status, count(*) FROM memories GROUP BY 1, 2, 3").fetchall()}
        vectors = {(c, m): int(n) for c, m, n in conn.execute(
            "SELECT collection, model_id, count(*) FROM embeddings GROUP BY 1, 2").fetchall()}
        payload = int(conn.execute("SELECT coalesce(sum(length(data)), 0) FROM payloads").fetchone()[0])
    stats = mem.stats()
    for coll, entry in stats["collections"].items():
        assert entry["by_status"] == {s: n for (c, _, s), n in _sum_types(recount).items() if c == coll}
    assert sum(stats["embeddings"].values()) == sum(vectors.values())
    assert stats["payload_bytes"] == payload
    live = sum(n for (c, t, s), n in recount.items() if s in ("active", "archived"))
    assert stats["memories"] == live


def _sum_types(recount: dict[tuple[str, str, str], int]) -> dict[tuple[str, str, str], int]:
    out: dict[tuple[str, str, str], int] = {}
    for (c, _, s), n in recount.items():
        out[(c, "", s)] = out.get((c, "", s), 0) + n
    return out


_QUERIES = ("red block", "lidar sweep dock", "gripper table")


def _recalls(mem: Memory) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for coll in ("arm", "base"):
        for q in _QUERIES:
            out[f"{coll}:{q}"] = {r["id"] for r in mem.recall(q, collection=coll, n=100, min_relevance=0,
                                                              min_confidence=0)["results"]}
        out[f"{coll}:spatial"] = [r["id"] for r in mem.recall("", collection=coll, n=100, min_confidence=0,
                                                             spatial_sort={"field": "spatial.p", "target": [3, 1]})["results"]]
    out["arm:filter"] = [r["id"] for r in mem.recall("", collection="arm", n=100, min_confidence=0,
                                                     context_filter={"task.step": {"$gte": 2}})["results"]]
    return out


def _check_recalls(before: dict[str, Any], after: dict[str, Any], purged: set[int]) -> None:
    for key, hits in before.items():
        if isinstance(hits, set):
            assert after[key] == hits - purged, key
        else:
            assert after[key] == [h for h in hits if h not in purged], key
    assert any(set(h) & purged for h in before.values())


def test_purge_deletes_every_row_of_old_perceptions_and_nothing_else(hybrid_mem: Memory, clock: Any) -> None:
    mem = hybrid_mem
    f = _fill(mem, clock)
    purged = set(f.old["arm"] + f.old["base"])
    # Vector recall through the index the store keeps (SQLite: a snapshot file whose overlay must
    # drop what change_log says was deleted; PostgreSQL: HNSW), not only the exact scan.
    mem.rebuild_vector_indexes(force=True, min_rows=1)
    assert {i["collection"] for i in mem.stats()["vector_indexes"]} == {"arm", "base"}
    before, recalled = _dump(mem), _recalls(mem)
    assert mem.purge_perceptions(f.cutoff, dry_run=True)["would_purge"] == len(purged)
    assert _dump(mem) == before  # a dry run deletes nothing
    result = mem.purge_perceptions(f.cutoff)
    assert result["purged"] == len(purged) and result["collections"] == {"arm": 26, "base": 10}
    _check_oracle(before, _dump(mem), purged)
    _check_recalls(recalled, _recalls(mem), purged)
    _check_counts(mem)
    assert mem.purge_perceptions(f.cutoff)["purged"] == 0
    timeline = mem.session_timeline(f.session)  # the session stays, with fewer records
    assert mem.get_session(f.session)["status"] == "ended"
    assert mem.session_overviews([f.session])[f.session]["summary"] is not None
    assert timeline


def test_purge_is_limited_to_a_collection_or_a_session(mem: Memory, clock: Any) -> None:
    f = _fill(mem, clock)
    before = _dump(mem)
    assert mem.purge_perceptions(f.cutoff, collection="base")["purged"] == 10
    _check_oracle(before, _dump(mem), set(f.old["base"]))
    other = mem.start_session(collection="arm")["session_id"]
    assert mem.purge_perceptions(f.cutoff, session_id=other)["purged"] == 0
    middle = _dump(mem)
    assert mem.purge_perceptions("2099-01-01T00:00:00Z", session_id=f.session)["purged"] == 26
    _check_oracle(middle, _dump(mem), set(f.old["arm"]))
    _check_counts(mem)


def test_a_purged_store_exports_and_imports(mem: Memory, clock: Any, tmp_path: Path, db_path: Any,
                                            backend: str) -> None:
    f = _fill(mem, clock)
    mem.purge_perceptions(f.cutoff)
    out = tmp_path / "export.jsonl"
    exported = mem.export(out)
    target = tmp_path / "copy.db"
    with Memory(target, clock=clock, embedder=None) as copy:
        copy.import_(out)
        assert copy.stats()["memories"] == mem.stats()["memories"]
        again = tmp_path / "again.jsonl"
        assert copy.export(again)["memories"] == exported["memories"]


def test_bad_input_names_the_field(mem: Memory, clock: Any) -> None:
    f = _fill(mem, clock)
    before = _dump(mem)
    for bad in ("yesterday", float("nan"), -5, None, True):
        with pytest.raises(ValidationError) as err:
            mem.purge_perceptions(bad)  # type: ignore[arg-type]
        assert err.value.field == "before"
    with pytest.raises(NotFoundError) as missing:
        mem.purge_perceptions(f.cutoff, collection="armm")
    assert missing.value.field == "collection"
    with pytest.raises(ValidationError) as bad_coll:
        mem.purge_perceptions(f.cutoff, collection="no spaces")
    assert bad_coll.value.field == "collection"
    with pytest.raises(NotFoundError) as no_session:
        mem.purge_perceptions(f.cutoff, session_id="ses_000000000000")
    assert no_session.value.field == "session_id"
    assert _dump(mem) == before


#: Purges in pages of 3, says "page" before each page commits, then waits there to be killed.
_KILLED = """
import sys, time
from robotmem import Memory
from robotmem.store import purge
purge.PAGE_IDS = 3
with Memory(sys.argv[1], embedder=None) as mem:
    store = mem.store
    inner = store.purge_page
    pages = [0]
    def page(conn, scope, limit):
        n = inner(conn, scope, limit)
        pages[0] += 1
        if pages[0] == 4:
            print("page", flush=True)
            time.sleep(600)
        return n
    store.purge_page = page
    mem.purge_perceptions(float(sys.argv[2]))
"""


def test_a_purge_killed_half_way_finishes_when_run_again(mem: Memory, clock: Any, db_path: Any) -> None:
    f = _fill(mem, clock)
    purged = set(f.old["arm"] + f.old["base"])
    before = _dump(mem)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, str(db_path), repr(f.cutoff)], env=env, text=True,
                            stdout=subprocess.PIPE)
    assert proc.stdout is not None
    try:  # the child prints "page" once three pages are committed; a child that dies early says so
        ready, _, _ = select.select([proc.stdout], [], [], 300)
        assert ready and proc.stdout.readline() == "page\n"
    finally:
        proc.send_signal(signal.SIGKILL)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    half = _dump(mem)
    gone = {owner for owner, _ in before["memories"]} - {owner for owner, _ in half["memories"]}
    assert len(gone) == 9  # three pages committed, the fourth lost with the process
    _check_oracle(before, half, gone)
    _check_counts(mem)
    assert mem.purge_perceptions(f.cutoff)["purged"] == len(purged) - 9
    _check_oracle(before, _dump(mem), purged)
    _check_counts(mem)


def test_each_page_starts_where_the_last_one_stopped(mem: Memory, clock: Any) -> None:
    """The rows a purge keeps (facts, summaries, protected ones) stay in the time index before the
    cutoff: without a cursor each page walked every one of them again under the write lock. The page
    after another starts its index range at the last one's time, on both stores."""
    f = _fill(mem, clock)
    scope = purge.PurgeScope("arm", f.cutoff, after=(f.cutoff - DAY, 5))
    query, params = purge.page_sql(scope, 3)
    with mem.store.read() as conn:
        if mem.store.kind == "sqlite":
            plan = " ".join(str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + query, params).fetchall())
            assert "memories_by_time (collection=? AND occurred_at>? AND occurred_at<?)" in plan, plan
        else:
            conn.execute("SET LOCAL enable_seqscan = off")  # a few hundred rows: the planner would scan them
            plan = " ".join(str(row[0]) for row in conn.execute("EXPLAIN " + query, params).fetchall())
            assert "Index Cond" in plan and "occurred_at >=" in plan, plan
    # and the pages together take exactly what one page of everything takes
    first = mem.purge_perceptions(f.cutoff, collection="arm", dry_run=True)["would_purge"]
    purge_pages = purge.PAGE_IDS
    try:
        purge.PAGE_IDS = 2
        assert mem.purge_perceptions(f.cutoff, collection="arm")["purged"] == first == len(f.old["arm"])
    finally:
        purge.PAGE_IDS = purge_pages


def _gin_bytes(mem: Memory) -> int:
    return int(mem._db.connection().execute("SELECT pg_relation_size(to_regclass('memories_context'))").fetchone()[0])


@pytest.mark.parametrize("rebuild", [False, True], ids=["below-the-bound", "above-the-bound"])
def test_a_postgresql_purge_rebuilds_a_context_index_grown_past_its_bound(
        postgres_url: str, clock: Any, monkeypatch: pytest.MonkeyPatch, rebuild: bool) -> None:
    # GIN never removes a key: the purged memories' context values stay in the index until it is
    # rebuilt. The bound (an index larger than GIN_REBUILD_RATIO times the table) is set here so
    # that the index is past it, or far below it.
    from robotmem.store import postgres

    monkeypatch.setattr(postgres, "GIN_REBUILD_RATIO", 0.0 if rebuild else 1e9)
    monkeypatch.setattr(postgres, "GIN_REBUILD_MIN_BYTES", 0)
    with Memory(postgres_url, clock=clock, embedder=None) as mem:
        mem.save_perceptions([{"description": f"arm pose {i}", "metadata": {
            "spatial": {"pose": [i * 0.001, i * 0.002, i * 0.003]}, "task": {"step": i}}} for i in range(1500)])
        clock.advance(10 * DAY)
        kept = mem.save_perception("arm pose kept", metadata={"task": {"step": 99_999}})["memory_id"]
        full = _gin_bytes(mem)
        assert mem.purge_perceptions(clock.now - DAY)["purged"] == 1500
        after = _gin_bytes(mem)
        hits = mem.recall("", n=10, min_confidence=0, context_filter={"task.step": 99_999})["results"]
        assert [h["id"] for h in hits] == [kept]
    if rebuild:
        assert after < full / 4
    else:
        assert after == full
