import json
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_service_sessions import TextVectors

from robotmem import Config, Memory, transfer
from robotmem.errors import ValidationError
from robotmem.store.backend import as_vector_bytes
from robotmem.store.rows import is_provisional

# Text holding NUL is refused, in keys, values and contents alike (PostgreSQL cannot store it).
no_nul = st.characters(codec="utf-8", exclude_characters="\x00")
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(no_nul, max_size=20))
context_keys = st.text(no_nul, min_size=1, max_size=8)
# "episode" too: end_session adds episode.outcome to it, which import must see through.
contexts = st.dictionaries(st.sampled_from(["params", "task", "robot", "spatial", "misc", "episode"]),
                           st.dictionaries(context_keys, json_scalars, max_size=3), max_size=4)
payloads = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(["t", "x", "label", "raw"]),
                    st.one_of(st.lists(st.floats(-1e6, 1e6, allow_nan=False), max_size=20),
                              st.lists(st.integers(-1000, 1000), max_size=20), st.text(max_size=10),
                              st.binary(max_size=16)), max_size=4),
)


def _snapshot(mem: Memory) -> list[dict]:
    out = []
    for hit in mem.recall("", context_filter={"misc": {"$exists": False}}, n=100, min_confidence=0)["results"] + \
            mem.recall("", context_filter={"misc": {"$exists": True}}, n=100, min_confidence=0)["results"]:
        record = mem.get(hit["id"])
        data = mem.get_data(hit["id"])
        out.append({k: record[k] for k in ("content", "type", "perception_type", "context", "status",
                                            "evidence_count", "created_at", "session_id")} | {"data": data})
    return sorted(out, key=lambda r: json.dumps(r, sort_keys=True))


texts = st.text(no_nul, min_size=5, max_size=40).filter(lambda s: len(s.strip()) >= 5)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=st.lists(st.tuples(texts, contexts, payloads), min_size=1, max_size=8),
       facts=st.lists(st.tuples(texts, contexts), max_size=6))
def test_export_then_import_round_trips_everything(tmp_path_factory, items, facts):
    tmp = tmp_path_factory.mktemp("rt")
    with Memory(tmp / "a.db", embedder=None) as source:
        sid = source.start_session(context={"task": {"name": "rt"}})["session_id"]
        for text, ctx, data in items:
            source.save_perception(text, "procedural", data=data, metadata=ctx, session_id=sid)
        for text, ctx in facts:
            source.learn(text, ctx, session_id=sid)
        source.end_session(sid, 0.5)
        before = _snapshot(source)
        exported = source.export(tmp / "dump.jsonl")["memories"]
        # Into the store it came from: everything is already there.
        assert source.import_(tmp / "dump.jsonl")["memories"] == 0
        assert _snapshot(source) == before
        with Memory(tmp / "b.db", embedder=None) as target:
            counts = target.import_(tmp / "dump.jsonl")
            assert counts["memories"] == exported
            assert _snapshot(target) == before
            assert target.get_session(sid)["outcome_score"] == 0.5
            again = target.import_(tmp / "dump.jsonl")
            assert again["memories"] == 0 and again["skipped"] == exported
            # An imported fact is the fact learn stored: learning it again answers as the source does.
            assert [target.learn(text, ctx)["status"] for text, ctx in facts] == \
                [source.learn(text, ctx)["status"] for text, ctx in facts]


def _episode(mem: Memory, score: float = 0.9) -> list[int]:
    """Facts and a perception of an ended, scored session: end_session added episode.outcome to each."""
    sid = mem.start_session()["session_id"]
    ids = [mem.learn("the left door sticks", session_id=sid)["memory_id"],
           mem.learn("the right door is locked", {"episode": {}}, session_id=sid)["memory_id"],
           mem.learn("the drawer opens halfway", {"episode": {"try": 2}}, session_id=sid)["memory_id"],
           mem.learn("the shelf is wobbly", {"episode": {"outcome": score}}, session_id=sid)["memory_id"],
           mem.save_perception("door handle camera frame", "visual", session_id=sid)["memory_id"]]
    mem.end_session(sid, score)
    assert all(mem.get(i)["context"]["episode"]["outcome"] == score for i in ids)
    return ids


def _live_facts(mem: Memory, text: str) -> list[str]:
    hits = mem.recall(text, n=100, min_relevance=0, min_confidence=0)["results"]
    return [h["content"] for h in hits if h["content"] == text]


def test_an_export_imported_into_its_own_store_adds_nothing(tmp_path: Path, mem: Memory):
    ids = _episode(mem)
    mem.export(tmp_path / "e.jsonl")
    for _ in range(2):
        counts = mem.import_(tmp_path / "e.jsonl")
        assert (counts["memories"], counts["skipped"]) == (0, len(ids))
    assert _live_facts(mem, "the left door sticks") == ["the left door sticks"]


def test_an_imported_fact_is_a_duplicate_of_a_later_learn(tmp_path: Path, mem: Memory):
    with Memory(tmp_path / "source.db", embedder=None) as source:
        _episode(source)
        source.export(tmp_path / "e.jsonl")
    assert mem.import_(tmp_path / "e.jsonl")["memories"] == 5
    assert mem.learn("the left door sticks")["status"] == "duplicate"
    assert mem.learn("the right door is locked", {"episode": {}})["status"] == "duplicate"
    assert mem.learn("the drawer opens halfway", {"episode": {"try": 2}})["status"] == "duplicate"
    assert mem.learn("the shelf is wobbly", {"episode": {"outcome": 0.9}})["status"] == "duplicate"
    assert _live_facts(mem, "the left door sticks") == ["the left door sticks"]


def test_import_keeps_vectors_and_status(tmp_path: Path, hybrid_mem: Memory):
    keep = hybrid_mem.learn("the gripper slipped on the wet glass bottle")["memory_id"]
    gone = hybrid_mem.learn("obsolete calibration value")["memory_id"]
    hybrid_mem.forget(gone, "obsolete")
    hybrid_mem.export(tmp_path / "dump.jsonl")
    with Memory(tmp_path / "copy.db") as copy:
        counts = copy.import_(tmp_path / "dump.jsonl")
        # The exported vector came back as it was: had the export dropped it, import would re-embed.
        assert counts["memories"] == 2 and counts["embedded"] == 0
        result = copy.recall("grasp failed on a slippery object", min_relevance=0)  # meaning alone: weak
        assert result["mode"] == "hybrid"
        assert [h["content"] for h in result["results"]] == [hybrid_mem.get(keep)["content"]]
        assert copy.stats()["collections"]["default"]["by_status"] == {"active": 1, "forgotten": 1}


def test_an_imported_fact_learned_here_too_is_not_stored_twice(tmp_path: Path, mem: Memory, clock):
    with Memory(tmp_path / "source.db", embedder=None) as source:
        source.learn("the left door sticks")
        source.export(tmp_path / "e.jsonl")
    clock.advance(60)  # learned here separately: another created_at, the same fact
    here = mem.learn("the left door sticks")["memory_id"]
    counts = mem.import_(tmp_path / "e.jsonl")
    assert (counts["memories"], counts["skipped"]) == (0, 1)
    assert _live_facts(mem, "the left door sticks") == ["the left door sticks"]
    assert mem.learn("the left door sticks")["memory_id"] == here


def _strict(line: str):
    def refuse(name: str):
        raise ValueError(f"{name} is not strict JSON")

    return json.loads(line, parse_constant=refuse)


def test_export_of_non_finite_data_is_strict_json_and_imports_the_same_payload(tmp_path: Path, mem: Memory):
    """Lasers report inf and sensors NaN: the payload keeps them (msgpack), the export's lines
    are strict JSON, and an older export whose summary holds Infinity tokens still imports."""
    from test_service_perception import NON_FINITE_DATA, _same

    mid = mem.save_perception("laser scan with inf readings", data=NON_FINITE_DATA)["memory_id"]
    mem.save_perception("a sensor reported nan alone", data=float("nan"))
    mem.export(tmp_path / "e.jsonl")
    lines = (tmp_path / "e.jsonl").read_text(encoding="utf-8").splitlines()
    records = [_strict(line) for line in lines]
    payloads = {r["content"]: r["payload"] for r in records if r["kind"] == "memory"}
    # An export written before summaries were kept strict: Python's json wrote Infinity and NaN.
    old = [line.replace('{"float": "inf"}', "Infinity").replace('{"float": "nan"}', "NaN") for line in lines]
    assert old != lines and "Infinity" in "".join(old)
    (tmp_path / "old.jsonl").write_text("\n".join(old) + "\n", encoding="utf-8")
    for name in ("e.jsonl", "old.jsonl"):
        with Memory(tmp_path / f"{name}.db", embedder=None) as copy:
            assert copy.import_(tmp_path / name)["memories"] == 2
            copy.export(tmp_path / f"{name}.again")
            again = [_strict(line) for line in (tmp_path / f"{name}.again").read_text(encoding="utf-8").splitlines()]
            # The same payload bytes, byte for byte (base64 of the msgpack).
            assert {r["content"]: r["payload"] for r in again if r["kind"] == "memory"} == payloads
            hit = copy.recall("laser scan", min_relevance=0)["results"][0]
            assert hit["payload"]["shape"]["f"] == {"float": "inf"}
            json.dumps(hit, allow_nan=False)
            new_id = hit["id"]
            assert _same(copy.get_data(new_id), mem.get_data(mid))


@pytest.mark.sqlite_only
def test_a_summary_stored_with_infinity_tokens_is_read_as_strict_json(tmp_path: Path, mem: Memory):
    """A store written before summaries were kept strict holds NaN / Infinity in payloads.summary."""
    mid = mem.save_perception("laser scan with inf readings", data={"f": 1.0})["memory_id"]
    mem._db.connection().execute("UPDATE payloads SET summary = ? WHERE memory_id = ?",
                                 ('{"bytes": 12, "shape": {"f": Infinity, "g": -Infinity, "h": NaN}}', mid))
    hit = mem.recall("laser scan", min_relevance=0)["results"][0]
    assert hit["payload"] == {"bytes": 12, "shape": {"f": {"float": "inf"}, "g": {"float": "-inf"},
                                                     "h": {"float": "nan"}}}
    mem.export(tmp_path / "e.jsonl")
    for line in (tmp_path / "e.jsonl").read_text(encoding="utf-8").splitlines():
        _strict(line)


# -- identity: every memory's uid survives export and import ---------------------------------------------


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _write_lines(path: Path, lines: list[dict]) -> None:
    """``lines`` as an export writes them: last, if the header is of format /2, an end record counting them."""
    body = [line for line in lines if line.get("kind") != "end"]
    if body and body[0].get("format") == "robotmem-export/2":
        body.append({"kind": "end", "sessions": sum(line["kind"] == "session" for line in body),
                     "memories": sum(line["kind"] == "memory" for line in body)})
    path.write_text("".join(json.dumps(line) + "\n" for line in body), encoding="utf-8")


def _memories(mem: Memory, path: Path) -> list[dict]:
    """Every memory of the store as its export line writes it (ids and the vector left out)."""
    mem.export(path)
    return sorted(({k: v for k, v in r.items() if k not in ("id", "superseded_by", "absorbed", "embedding")}
                   for r in _lines(path) if r["kind"] == "memory"), key=lambda r: r["uid"])


def _samples(n: int) -> list[dict]:
    return [{"description": "joint state sample from /joint_states", "perception_type": "proprioceptive",
             "metadata": {"robot": {"id": "r1"}}, "data": {"q": [0.1 * i] * 6}, "occurred_at": 1_700_000_000 + i,
             "embed": False} for i in range(n)]


def test_a_batch_of_samples_with_one_description_round_trips_every_sample(tmp_path: Path, mem: Memory, clock):
    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        with robot.bulk_writer() as writer:
            writer.save_perceptions(_samples(100))
        robot.save_perceptions(_samples(100))  # one call, the same again: another 100 records
        robot.export(tmp_path / "e.jsonl")
        before = _memories(robot, tmp_path / "before.jsonl")
        assert robot.import_(tmp_path / "e.jsonl")["memories"] == 0  # into its own store
    counts = mem.import_(tmp_path / "e.jsonl")
    assert (counts["memories"], counts["skipped"]) == (200, 0)
    after = _memories(mem, tmp_path / "after.jsonl")
    assert after == before  # uids, payloads, occurred_at: all 200 as they were
    assert sorted(mem.get_data(i)["q"][0] for i in range(1, 201)) == sorted([0.1 * i for i in range(100)] * 2)
    again = mem.import_(tmp_path / "e.jsonl")
    assert (again["memories"], again["skipped"]) == (0, 200)


def test_five_identical_records_are_five_records(tmp_path: Path, mem: Memory, clock):
    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        robot.save_perceptions([{"description": "contact on the left finger pad", "perception_type": "tactile"}] * 5)
        robot.export(tmp_path / "e.jsonl")
    assert mem.import_(tmp_path / "e.jsonl")["memories"] == 5
    assert mem.import_(tmp_path / "e.jsonl")["memories"] == 0
    assert mem.stats()["collections"]["default"]["by_status"] == {"active": 5}


def test_facts_with_one_text_and_one_created_at_are_different_records(tmp_path: Path, mem: Memory, clock):
    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        old = robot.learn("the left door sticks")["memory_id"]
        robot.forget(old, "fixed, then it stuck again")
        new = robot.learn("the left door sticks")["memory_id"]  # the same clock time: the same created_at
        assert new != old and robot.get(new)["created_at"] == robot.get(old)["created_at"]
        robot.export(tmp_path / "e.jsonl")
    counts = mem.import_(tmp_path / "e.jsonl")
    assert (counts["memories"], counts["skipped"]) == (2, 0)
    assert mem.stats()["collections"]["default"]["by_status"] == {"active": 1, "forgotten": 1}
    assert _live_facts(mem, "the left door sticks") == ["the left door sticks"]


def test_an_older_export_imported_after_an_update_adds_nothing(tmp_path: Path, mem: Memory):
    kept = mem.learn("the left door sticks")["memory_id"]
    mem.save_perception("door handle camera frame", "visual")
    mem.export(tmp_path / "before.jsonl")
    mem.update(kept, "the left door sticks when it is wet")
    counts = mem.import_(tmp_path / "before.jsonl")
    assert (counts["memories"], counts["skipped"]) == (0, 2)
    assert mem.get(kept)["content"] == "the left door sticks when it is wet"  # the store's version wins
    hits = mem.recall("left door", n=100, min_relevance=0, min_confidence=0)["results"]
    assert [h["content"] for h in hits if "door sticks" in h["content"]] == ["the left door sticks when it is wet"]


def _without_uids(source: Path, target: Path) -> None:
    """The file as robotmem wrote it before memories had a uid (format /1, without an end record)."""
    lines = [{k: v for k, v in r.items() if k != "uid"} for r in _lines(source) if r["kind"] != "end"]
    lines[0]["format"] = "robotmem-export/1"
    target.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")


def test_an_export_without_uids_still_imports_once(tmp_path: Path, mem: Memory, clock):
    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        _episode(robot)
        robot.save_perceptions([{"description": "contact on the left finger pad", "perception_type": "tactile"}] * 5)
        robot.export(tmp_path / "new.jsonl")
        _without_uids(tmp_path / "new.jsonl", tmp_path / "old.jsonl")
        own = robot.import_(tmp_path / "old.jsonl")  # its rows have uids the file does not know: the old rule
        assert (own["memories"], own["skipped"]) == (0, 10)
    for expected in (10, 0):
        assert mem.import_(tmp_path / "old.jsonl")["memories"] == expected
    assert mem.stats()["collections"]["default"]["by_status"] == {"active": 10}
    assert _live_facts(mem, "the left door sticks") == ["the left door sticks"]


def _merged_episode(mem: Memory, clock) -> dict[str, int]:
    """A session whose end merged one fact into another (superseded_by one way, absorbed the other),
    with perceptions between, so that a small batch puts the two on either side of a boundary."""
    sid = mem.start_session()["session_id"]
    ids = {"kept": mem.learn("Approach the mug slowly from the left", session_id=sid)["memory_id"]}
    for i in range(3):
        clock.advance(1)
        mem.save_perception(f"wrist camera frame number {i}", "visual", session_id=sid)
    ids["merged"] = mem.learn("approach the mug slowly, from the left", session_id=sid)["memory_id"]
    assert mem.end_session(sid, 0.8)["merged"] == 1
    assert mem.get(ids["merged"])["superseded_by"] == ids["kept"]
    assert mem.get(ids["kept"])["absorbed"] == [ids["merged"]]
    return ids


def _links(mem: Memory) -> dict[str, tuple]:
    """Each memory's links, by content, as contents."""
    records = {r["id"]: r for r in (mem.get(i) for i in _all_ids(mem))}
    return {r["content"]: (r["status"], records[r["superseded_by"]]["content"] if r["superseded_by"] else None,
                           [records[a]["content"] for a in r["absorbed"]]) for r in records.values()}


def _import_meanwhile(monkeypatch: pytest.MonkeyPatch, mem: Memory, other: Memory, path: Path) -> list[dict]:
    """``other`` imports ``path`` inside ``mem``'s first uid lookup (between a batch's lookup and its
    writes, on PostgreSQL where both run at once); the returned list gets that import's counts."""
    looked_up = mem.store.ids_by_uid
    counts: list[dict] = []

    def the_other_import_meanwhile(conn: Any, uids: list[str]) -> dict[str, int]:
        found = looked_up(conn, uids)
        if not counts:
            counts.append(other.import_(path))
        return found

    monkeypatch.setattr(mem.store, "ids_by_uid", the_other_import_meanwhile)
    return counts


def _all_ids(mem: Memory) -> list[int]:
    with mem.store.read() as conn:
        return [int(i) for (i,) in conn.execute("SELECT id FROM memories ORDER BY id")]


def test_links_are_remapped_across_batches(tmp_path: Path, mem: Memory, clock, monkeypatch):
    monkeypatch.setattr(transfer, "IMPORT_BATCH", 2)
    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        _merged_episode(robot, clock)
        expected = _links(robot)
        robot.export(tmp_path / "e.jsonl")
    mem.save_perception("a memory of the store before the import", "visual")  # other ids than the source's
    assert mem.import_(tmp_path / "e.jsonl")["memories"] == 5
    assert {k: v for k, v in _links(mem).items() if k in expected} == expected
    with mem.store.read() as conn:
        assert conn.execute("SELECT count(*) FROM import_links").fetchone()[0] == 0


def test_an_import_stopped_between_batches_finishes_when_run_again(tmp_path: Path, mem: Memory, clock,
                                                                   monkeypatch):
    monkeypatch.setattr(transfer, "IMPORT_BATCH", 2)
    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        _merged_episode(robot, clock)
        robot.save_perceptions([{"description": "contact on the left finger pad", "perception_type": "tactile"}] * 3)
        expected = _links(robot)
        before = _memories(robot, tmp_path / "before.jsonl")
        robot.export(tmp_path / "e.jsonl")

    class Stop(Exception):
        pass

    def stop_after_first_batch(done: int) -> None:
        raise Stop(done)

    monkeypatch.setattr(transfer, "_after_batch", stop_after_first_batch)
    with pytest.raises(Stop):
        mem.import_(tmp_path / "e.jsonl")
    assert len(_all_ids(mem)) == 2  # the first batch is stored, its forward link waits
    monkeypatch.setattr(transfer, "_after_batch", None)
    counts = mem.import_(tmp_path / "e.jsonl")
    assert (counts["memories"], counts["skipped"]) == (6, 2)
    assert _memories(mem, tmp_path / "after.jsonl") == before
    assert _links(mem) == expected
    assert mem.import_(tmp_path / "e.jsonl")["memories"] == 0


def test_a_skipped_record_writes_no_other_row(tmp_path: Path, mem: Memory, clock):
    """The same fact learned here is the live copy an imported fact is mapped to: the import must
    not write the links of the file's record over that row."""
    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        _merged_episode(robot, clock)
        robot.export(tmp_path / "e.jsonl")
    here = mem.learn("Approach the mug slowly from the left")["memory_id"]  # the hash the file's fact has
    counts = mem.import_(tmp_path / "e.jsonl")
    assert counts["skipped"] == 1
    assert mem.get(here)["absorbed"] == [] and mem.get(here)["superseded_by"] is None


@pytest.mark.sqlite_only
def test_import_looks_records_up_through_indexes(tmp_path: Path, mem: Memory, clock, db_path, monkeypatch):
    """No statement of an import scans the memories (a scan per record made it quadratic)."""
    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        _merged_episode(robot, clock)
        robot.save_perceptions(_samples(20))
        robot.learn("the shelf is wobbly")
        robot.export(tmp_path / "new.jsonl")
    _without_uids(tmp_path / "new.jsonl", tmp_path / "old.jsonl")
    mem.save_perceptions(_samples(20))
    Memory(tmp_path / "restored.db", clock=clock, embedder=None).close()  # created (and migrated) untraced
    statements: list[tuple[str, tuple]] = []

    def trace(_cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
        statements.append((sql, tuple(bindings) if isinstance(bindings, (list, tuple)) else ()))
        return True

    def hook(conn: apsw.Connection) -> None:
        conn.exec_trace = trace

    monkeypatch.setattr(apsw, "connection_hooks", [*apsw.connection_hooks, hook])
    monkeypatch.setattr(transfer, "IMPORT_BATCH", 7)
    with Memory(db_path, clock=clock, embedder=None) as traced:
        for name in ("new.jsonl", "old.jsonl", "new.jsonl"):
            traced.import_(tmp_path / name)
    with Memory(tmp_path / "restored.db", clock=clock, embedder=None) as restored:
        for name in ("old.jsonl", "new.jsonl"):  # the second takes the provisional rows of the first
            restored.import_(tmp_path / name)
    reads = {(sql, b) for sql, b in statements
             if "memories" in sql and sql.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE"))}
    assert any("uid" in sql for sql, _ in reads) and any("created_at = ?" in sql for sql, _ in reads)
    assert any(sql.startswith("UPDATE memories SET uid") for sql, _ in reads)
    check = apsw.Connection(str(db_path))
    for sql, bindings in reads:
        plan = [row[-1] for row in check.execute("EXPLAIN QUERY PLAN " + sql, bindings)]
        assert not any(step.startswith("SCAN") and "memories" in step and "json_each" not in step
                       for step in plan), (sql, plan)


def test_another_writer_writes_between_batches(tmp_path: Path, mem: Memory, db_path, clock, monkeypatch):
    """Each batch commits on its own: a writer that will not wait (busy timeout 0) gets in between."""
    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        robot.save_perceptions(_samples(10))
        robot.export(tmp_path / "e.jsonl")
    monkeypatch.setattr(transfer, "IMPORT_BATCH", 3)
    with Memory(db_path, clock=clock, embedder=None, config=Config(busy_timeout_ms=0)) as other:
        written: list[int] = []
        monkeypatch.setattr(transfer, "_after_batch", lambda done: written.append(
            other.save_perception(f"written after {done} imported", "visual")["memory_id"]))
        assert mem.import_(tmp_path / "e.jsonl")["memories"] == 10
    assert len(written) == 4 and mem.stats()["collections"]["default"]["by_status"] == {"active": 14}


def test_an_export_holding_times_outside_1970_to_9999_is_restored_with_them_read_or_noted(tmp_path: Path, mem: Memory):
    # Versions before that range stored such times (an occurred_at given in milliseconds): a
    # backup holding them imports whole, a time in ms read as such, any other brought into range.
    with Memory(tmp_path / "old.db", embedder=None) as old:
        old.learn("the cart left the dock at noon")
        old.save_perception("wrist force during the push", "tactile", data={"f": [1.0, 2.0]})
        old.export(tmp_path / "old.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "old.jsonl").read_text().splitlines()]
    for line in lines:
        if line.get("kind") == "memory" and line["type"] == "fact":
            line["occurred_at"] = 1_764_000_000_000.0  # milliseconds
        if line.get("kind") == "memory" and line["type"] == "perception":
            line["last_seen"] = 1e300
    (tmp_path / "old.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    counts = mem.import_(tmp_path / "old.jsonl")
    assert counts["memories"] == 2 and (counts["times_rescaled"], counts["times_clamped"]) == (1, 1)
    hits = mem.recall("", since=0, n=10, min_confidence=0)["results"]
    assert 1_764_000_000.0 in [r["occurred_at"] for r in hits]  # read as milliseconds
    assert mem.import_(tmp_path / "old.jsonl")["memories"] == 0  # a rerun adds nothing


def _rewrite(path: Path, change) -> None:
    """The export at ``path`` with ``change(memory_lines)`` applied in place."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    change([line for line in lines if line.get("kind") == "memory"])
    _write_lines(path, lines)


def _camera_export(tmp_path: Path, frames: int) -> Path:
    """An export of another store holding ``frames`` camera perceptions."""
    with Memory(tmp_path / "robot.db", embedder=None) as robot:
        for i in range(frames):
            robot.save_perception(f"camera frame {i}", "visual")
        robot.export(tmp_path / "e.jsonl")
    return tmp_path / "e.jsonl"


def test_two_lines_with_one_uid_refuse_the_file_before_anything_is_written(tmp_path: Path, mem: Memory):
    _camera_export(tmp_path, 3)

    def same_uid(memories: list[dict]) -> None:
        memories[2]["uid"] = memories[0]["uid"]

    _rewrite(tmp_path / "e.jsonl", same_uid)
    with pytest.raises(ValidationError, match=r"nothing imported, 1 bad line\(s\): line 4: uid [0-9a-f]{32} "
                                              r"is also the uid of line 2"):
        mem.import_(tmp_path / "e.jsonl")
    assert _all_ids(mem) == []


def test_a_uid_of_another_memory_of_the_store_refuses_the_file(tmp_path: Path, mem: Memory):
    """A line whose uid is held here by a different memory is not that memory: skipping it (and
    pointing its links at that memory) would lose it and link the wrong memory."""
    _camera_export(tmp_path, 2)
    own = mem.save_perception("this store's own memory", "visual")["memory_id"]
    with mem.store.read() as conn:
        own_uid = conn.execute("SELECT uid FROM memories WHERE id = ?", (own,)).fetchone()[0]

    def collide(memories: list[dict]) -> None:
        memories[0]["uid"] = own_uid
        memories[1].update(status="superseded", superseded_by=memories[0]["id"])

    _rewrite(tmp_path / "e.jsonl", collide)
    with pytest.raises(ValidationError, match=rf"nothing imported, 1 bad line\(s\): line 2: uid {own_uid} belongs "
                                              rf"to memory {own} of this store, a different memory"):
        mem.import_(tmp_path / "e.jsonl")
    assert _all_ids(mem) == [own] and mem.get(own)["status"] == "active"


def test_a_uid_of_the_same_memory_updated_here_is_that_memory(tmp_path: Path, mem: Memory):
    """Content (and so context) may differ: an update changes them, not what memory it is."""
    first = mem.save_perception("camera frame 0", "visual")["memory_id"]
    mem.export(tmp_path / "e.jsonl")
    mem.update(first, "camera frame 0, relabelled")
    counts = mem.import_(tmp_path / "e.jsonl")
    assert (counts["memories"], counts["skipped"]) == (0, 1)


def test_links_to_memories_not_in_the_file_are_dropped(tmp_path: Path, mem: Memory):
    """An id that is not in the file is the source store's: kept, it would name an unrelated memory here."""
    _camera_export(tmp_path, 3)

    def dangling(memories: list[dict]) -> None:
        first = memories.pop(0)  # id 1 is not in the file
        memories[0].update(status="superseded", superseded_by=999)
        memories[1].update(absorbed=[first["id"], 998, memories[0]["id"]])

    lines = [json.loads(line) for line in (tmp_path / "e.jsonl").read_text().splitlines()]
    memories = [line for line in lines if line.get("kind") == "memory"]
    dangling(memories)
    _write_lines(tmp_path / "e.jsonl", [x for x in lines if x.get("kind") != "memory"] + memories)
    local = mem.save_perception("this store's own memory number one", "visual")["memory_id"]
    assert mem.import_(tmp_path / "e.jsonl")["memories"] == 2
    links = _links(mem)
    assert links["camera frame 1"] == ("superseded", None, [])
    assert links["camera frame 2"] == ("active", None, ["camera frame 1"])
    assert links["this store's own memory number one"] == ("active", None, []) and local == 1


def test_a_link_is_written_by_the_batch_that_stores_its_last_target_and_waiting_links_are_not_reread(
        tmp_path: Path, mem: Memory, clock, monkeypatch):
    """A link waiting for the file's last line used to be read again after every batch (a 1M-line
    import with many such links spent most of its time there): now only the first and the last
    batch read every waiting link, and a batch in between reads those it may complete."""
    monkeypatch.setattr(transfer, "IMPORT_BATCH", 2)
    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        robot.save_perceptions(_samples(8))
        robot.export(tmp_path / "e.jsonl")

    def absorb_later_lines(memories: list[dict]) -> None:
        memories[0]["absorbed"] = [memories[3]["id"]]  # complete in the second of four batches
        memories[1]["absorbed"] = [memories[7]["id"]]  # waits for the last

    _rewrite(tmp_path / "e.jsonl", absorb_later_lines)
    full_reads = 0
    every_waiting_link = transfer._write_links

    def counted(db, conn, run, touched=None):
        nonlocal full_reads
        full_reads += touched is None
        every_waiting_link(db, conn, run, touched)

    monkeypatch.setattr(transfer, "_write_links", counted)
    waiting: list[tuple[int, int]] = []

    def look(done: int) -> None:
        with mem.store.read() as conn:
            waiting.append((done, int(conn.execute("SELECT count(*) FROM import_links").fetchone()[0])))

    monkeypatch.setattr(transfer, "_after_batch", look)
    assert mem.import_(tmp_path / "e.jsonl")["memories"] == 8
    assert waiting == [(2, 2), (4, 1), (6, 1), (8, 0)]
    assert full_reads == 2
    with mem.store.read() as conn:
        rows = list(conn.execute("SELECT id, occurred_at, absorbed FROM memories"))
    when = {int(i): round(float(t)) - 1_700_000_000 for i, t, _ in rows}
    absorbed = {when[int(i)]: [when[a] for a in (json.loads(a) if isinstance(a, str) else a)] for i, _, a in rows}
    assert {k: v for k, v in absorbed.items() if v} == {0: [3], 1: [7]}


def test_two_imports_of_one_file_at_once_into_postgresql_store_each_record_once(tmp_path: Path, postgres_url: str,
                                                                               clock, monkeypatch):
    """The other import stores the file between this one's look-up of a batch and its inserts: the
    unique uid refuses this one's rows, which are then that import's (skipped), and both finish."""
    monkeypatch.setattr(transfer, "IMPORT_BATCH", 2)
    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        _merged_episode(robot, clock)
        robot.save_perception("gripper closes on the mug", "tactile")
        expected = _links(robot)
        robot.export(tmp_path / "e.jsonl")
    with Memory(postgres_url, clock=clock, embedder=None) as first, \
            Memory(postgres_url, clock=clock, embedder=None) as second:
        first_counts = _import_meanwhile(monkeypatch, second, first, tmp_path / "e.jsonl")
        counts = second.import_(tmp_path / "e.jsonl")
        assert first_counts[0]["memories"] == 6
        assert (counts["memories"], counts["skipped"]) == (0, 6)
        assert _links(second) == expected and len(_all_ids(second)) == 6
        with second.store.read() as conn:
            assert conn.execute("SELECT count(*) FROM import_links").fetchone()[0] == 0


# -- provisional uids: those robotmem invented for memories older than uids ------------------------------


def _uids(mem: Memory) -> list[str]:
    with mem.store.read() as conn:
        return sorted(str(u) for (u,) in conn.execute("SELECT uid FROM memories"))


def _source(path: Path, clock) -> None:
    """Facts, a perception and five identical samples: the old rule tells the samples apart only by count."""
    with Memory(path, clock=clock, embedder=None) as robot:
        _episode(robot)
        robot.save_perceptions([{"description": "contact on the left finger pad", "perception_type": "tactile"}] * 5)


def _upgraded_from_before_uids(path: Path) -> None:
    """The uids SQLite's migration 19 gives rows written before memories had one."""
    conn = apsw.Connection(str(path))
    conn.execute("UPDATE memories SET uid = '000000000000' || lower(hex(randomblob(10)))")
    conn.close()


@pytest.mark.parametrize("source_had_uids", [True, False])
def test_a_store_restored_before_uids_takes_the_uids_of_a_newer_export(tmp_path: Path, mem: Memory, clock,
                                                                       source_had_uids: bool):
    """S exported before uids, imported into T; both upgraded: S's new export adds nothing to T."""
    _source(tmp_path / "robot.db", clock)
    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        robot.export(tmp_path / "e.jsonl")
    _without_uids(tmp_path / "e.jsonl", tmp_path / "old.jsonl")
    assert mem.import_(tmp_path / "old.jsonl")["memories"] == 10
    assert all(is_provisional(u) for u in _uids(mem))  # what T's migration would have given them
    if not source_had_uids:
        _upgraded_from_before_uids(tmp_path / "robot.db")
    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        robot.export(tmp_path / "new.jsonl")
        source_uids = _uids(robot)
        expected = robot.stats()["collections"]["default"]["by_status"]
    for _ in range(2):
        counts = mem.import_(tmp_path / "new.jsonl")
        assert (counts["memories"], counts["skipped"]) == (0, 10)
        assert mem.stats()["collections"]["default"]["by_status"] == expected == {"active": 10}
    if source_had_uids:
        assert _uids(mem) == source_uids  # the rows took the source's uids: the rule is needed once
    else:
        assert all(is_provisional(u) for u in _uids(mem))
    assert _live_facts(mem, "the left door sticks") == ["the left door sticks"]


def test_an_old_backup_then_a_newer_export_restore_each_memory_once(tmp_path: Path, mem: Memory, clock):
    _source(tmp_path / "robot.db", clock)
    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        robot.export(tmp_path / "e.jsonl")
        _without_uids(tmp_path / "e.jsonl", tmp_path / "old.jsonl")  # the backup of before uids
        clock.advance(5)
        robot.save_perceptions([{"description": "contact on the left finger pad", "perception_type": "tactile"}] * 2)
        robot.export(tmp_path / "new.jsonl")
        source_uids = _uids(robot)
    assert mem.import_(tmp_path / "old.jsonl")["memories"] == 10
    counts = mem.import_(tmp_path / "new.jsonl")
    assert (counts["memories"], counts["skipped"]) == (2, 10)
    assert _uids(mem) == source_uids
    assert mem.import_(tmp_path / "new.jsonl")["memories"] == 0
    assert mem.import_(tmp_path / "old.jsonl")["memories"] == 0
    assert mem.stats()["collections"]["default"]["by_status"] == {"active": 12}


def test_a_file_of_an_old_backup_then_a_newer_export_restores_each_memory_once(tmp_path: Path, mem: Memory,
                                                                                 clock, monkeypatch):
    monkeypatch.setattr(transfer, "IMPORT_BATCH", 3)
    _source(tmp_path / "robot.db", clock)
    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        robot.export(tmp_path / "e.jsonl")
        _without_uids(tmp_path / "e.jsonl", tmp_path / "old.jsonl")
        source_uids = _uids(robot)
    (tmp_path / "both.jsonl").write_text((tmp_path / "old.jsonl").read_text(encoding="utf-8")
                                         + _body(tmp_path / "e.jsonl"), encoding="utf-8")
    counts = mem.import_(tmp_path / "both.jsonl")
    assert (counts["memories"], counts["skipped"]) == (10, 10)
    assert _uids(mem) == source_uids
    assert mem.import_(tmp_path / "e.jsonl")["memories"] == 0
    assert mem.stats()["collections"]["default"]["by_status"] == {"active": 10}


def test_records_with_their_own_uids_are_never_merged_by_text_and_time(tmp_path: Path, mem: Memory, clock):
    """Two stores that each saved the same sample at the same time: different memories, all kept."""
    sample = [{"description": "contact on the left finger pad", "perception_type": "tactile"}] * 3
    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        robot.save_perceptions(sample)
        robot.export(tmp_path / "e.jsonl")
    mem.save_perceptions(sample)  # the same clock: the same created_at, text and hash; their own uids
    own = _uids(mem)
    counts = mem.import_(tmp_path / "e.jsonl")
    assert (counts["memories"], counts["skipped"]) == (3, 0)
    assert set(own) <= set(_uids(mem)) and len(_uids(mem)) == 6
    assert mem.stats()["collections"]["default"]["by_status"] == {"active": 6}


def _provisional_uids(source: Path, target: Path) -> None:
    """The file as a store whose rows were older than uids exports it: each a provisional uid."""
    lines = _lines(source)
    for line in lines:
        if line["kind"] == "memory":
            line["uid"] = "000000000000" + line["uid"][12:]
    target.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def _body(path: Path) -> str:
    """The file's lines between its header and its end record."""
    return "".join(line for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
                   if json.loads(line)["kind"] not in ("header", "end"))


def _one_file(target: Path, header: str, *bodies: str) -> None:
    """One export of the bodies' lines, under ``header``."""
    _write_lines(target, [json.loads(line) for line in (header + "".join(bodies)).splitlines()])


@pytest.mark.parametrize("old_lines", ["without uids", "with provisional uids"])
@pytest.mark.parametrize("order", ["newer first", "old first"])
def test_a_file_of_a_newer_export_and_an_old_backup_stores_each_memory_once(tmp_path: Path, mem: Memory, clock,
                                                                            monkeypatch, old_lines: str, order: str):
    """Either order, stopped between batches or not, imported again or not: the old lines are the
    newer lines' memories."""
    monkeypatch.setattr(transfer, "IMPORT_BATCH", 3)
    _source(tmp_path / "robot.db", clock)
    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        robot.export(tmp_path / "e.jsonl")
        source_uids = _uids(robot)
    (_without_uids if old_lines == "without uids" else _provisional_uids)(tmp_path / "e.jsonl", tmp_path / "old.jsonl")
    header = (tmp_path / "e.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[0]
    parts = [_body(tmp_path / "e.jsonl"), _body(tmp_path / "old.jsonl")]
    _one_file(tmp_path / "both.jsonl", header, *(parts if order == "newer first" else parts[::-1]))

    def stop(done: int) -> None:
        raise RuntimeError(done)

    monkeypatch.setattr(transfer, "_after_batch", stop)
    with pytest.raises(RuntimeError):
        mem.import_(tmp_path / "both.jsonl")
    monkeypatch.setattr(transfer, "_after_batch", None)
    counts = mem.import_(tmp_path / "both.jsonl")
    assert (counts["memories"], counts["skipped"]) == (7, 13)  # the first batch's 3 were stored
    assert _uids(mem) == source_uids
    for name in ("both.jsonl", "e.jsonl", "both.jsonl"):
        assert mem.import_(tmp_path / name)["memories"] == 0
    assert mem.stats()["collections"]["default"]["by_status"] == {"active": 10}


def _renumbered(path: Path, by: int) -> None:
    """The export as a store holding the same memories under other ids writes it."""
    def shift(memories: list[dict]) -> None:
        for m in memories:
            m["id"] += by
            m["superseded_by"] = m["superseded_by"] and m["superseded_by"] + by
            m["absorbed"] = [a + by for a in m["absorbed"]]

    _rewrite(path, shift)


@pytest.mark.parametrize("newer_ids", ["the same", "others"])
def test_links_a_stopped_import_of_an_old_backup_left_waiting_follow_a_newer_export(
        tmp_path: Path, mem: Memory, clock, monkeypatch, newer_ids: str):
    """The stopped import left the kept fact's links waiting, naming the uids it gave the lines of
    a frame (stored) and of the merged fact (not stored yet). The newer export gives the frame's row
    its own uid and stores the merged fact under its own: the links follow both."""
    monkeypatch.setattr(transfer, "IMPORT_BATCH", 2)
    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        _merged_episode(robot, clock)
        robot.export(tmp_path / "new.jsonl")

    def absorb_a_frame_too(memories: list[dict]) -> None:
        memories[0]["absorbed"] = [memories[1]["id"], *memories[0]["absorbed"]]

    _rewrite(tmp_path / "new.jsonl", absorb_a_frame_too)
    _without_uids(tmp_path / "new.jsonl", tmp_path / "old.jsonl")
    frame_uid = _lines(tmp_path / "new.jsonl")[3]["uid"]  # header, session, kept fact, frame 0
    if newer_ids == "others":
        _renumbered(tmp_path / "new.jsonl", 100)

    def stop(done: int) -> None:
        raise RuntimeError(done)

    monkeypatch.setattr(transfer, "_after_batch", stop)
    with pytest.raises(RuntimeError):
        mem.import_(tmp_path / "old.jsonl")
    monkeypatch.setattr(transfer, "_after_batch", None)
    counts = mem.import_(tmp_path / "new.jsonl")
    assert (counts["memories"], counts["skipped"]) == (3, 2)
    with mem.store.read() as conn:
        waiting = [json.loads(a) for (a,) in conn.execute("SELECT absorbed FROM import_links")]
    if newer_ids == "others":
        # Its lines' uids cannot be told from the old lines': the link waits for the old file's rerun,
        # under the uid the frame's row took.
        assert len(waiting) == 1 and frame_uid in waiting[0]
        assert mem.import_(tmp_path / "old.jsonl")["memories"] == 0
    else:
        assert waiting == []
    assert _links(mem)["Approach the mug slowly from the left"] == (
        "active", None, ["wrist camera frame number 0", "approach the mug slowly, from the left"])
    with mem.store.read() as conn:
        assert conn.execute("SELECT count(*) FROM import_links").fetchone()[0] == 0
    assert len(_all_ids(mem)) == 5


def test_a_uid_stored_by_another_writer_while_a_batch_adopts_a_row_is_that_record(tmp_path: Path, postgres_url: str,
                                                                                   clock, monkeypatch):
    """Between the batch's look-up and its giving a provisional row the record's uid, another writer
    (an import of an export in which the memory was relabelled) stores that uid in a row of its own:
    the batch goes on, the record counts as skipped, and the row it did not take stays unclaimed."""
    monkeypatch.setattr(transfer, "IMPORT_BATCH", 2)
    _camera_export(tmp_path, 2)
    _without_uids(tmp_path / "e.jsonl", tmp_path / "old.jsonl")

    def relabel(memories: list[dict]) -> None:
        memories[0]["content"] = "camera frame 0, relabelled"
        del memories[1:]

    (tmp_path / "other.jsonl").write_text((tmp_path / "e.jsonl").read_text())
    _rewrite(tmp_path / "other.jsonl", relabel)
    with Memory(postgres_url, clock=clock, embedder=None) as mem, \
            Memory(postgres_url, clock=clock, embedder=None) as other:
        assert mem.import_(tmp_path / "old.jsonl")["memories"] == 2
        looked_up = mem.store.ids_by_uid
        others = _import_meanwhile(monkeypatch, mem, other, tmp_path / "other.jsonl")
        counts = mem.import_(tmp_path / "e.jsonl")
        assert others[0]["memories"] == 1
        assert (counts["memories"], counts["skipped"]) == (0, 2)
        monkeypatch.setattr(mem.store, "ids_by_uid", looked_up)
        assert sorted(is_provisional(u) for u in _uids(mem)) == [False, False, True]
        assert sorted(set(_uids(mem)) - {u for u in _uids(mem) if is_provisional(u)}) == \
            sorted(r["uid"] for r in _lines(tmp_path / "e.jsonl") if r["kind"] == "memory")
        assert mem.import_(tmp_path / "e.jsonl")["memories"] == 0


def test_a_provisional_row_another_import_took_between_batches_keeps_that_import_s_uid(tmp_path: Path, mem: Memory,
                                                                                        db_path, clock, monkeypatch):
    """This run read the two look-alike provisional rows in its first batch; before its second,
    another import gave the second row the uid of a third robot's identical sample. The second
    batch's record does not take that row from it (it is stored as a row of its own)."""
    monkeypatch.setattr(transfer, "IMPORT_BATCH", 1)
    sample = [{"description": "contact on the left finger pad", "perception_type": "tactile"}]
    for name, n in (("robot", 2), ("third", 1)):
        with Memory(tmp_path / f"{name}.db", clock=clock, embedder=None) as robot:
            robot.save_perceptions(sample * n)
            robot.export(tmp_path / f"{name}.jsonl")
    _without_uids(tmp_path / "robot.jsonl", tmp_path / "old.jsonl")
    assert mem.import_(tmp_path / "old.jsonl")["memories"] == 2
    with Memory(db_path, clock=clock, embedder=None) as other:
        others: list[dict] = []

        def the_other_import_once(done: int) -> None:
            if not others:
                monkeypatch.setattr(transfer, "_after_batch", None)  # its own batches go uninterrupted
                others.append(other.import_(tmp_path / "third.jsonl"))

        monkeypatch.setattr(transfer, "_after_batch", the_other_import_once)
        counts = mem.import_(tmp_path / "robot.jsonl")
    assert (others[0]["memories"], others[0]["skipped"]) == (0, 1)
    assert (counts["memories"], counts["skipped"]) == (1, 1)
    assert _uids(mem) == sorted(r["uid"] for name in ("robot", "third")
                                for r in _lines(tmp_path / f"{name}.jsonl") if r["kind"] == "memory")


@pytest.mark.parametrize("old_lines", ["without uids", "with provisional uids"])
def test_links_a_stopped_import_of_an_old_backup_left_waiting_resolve_in_a_file_of_both(
        tmp_path: Path, mem: Memory, clock, monkeypatch, old_lines: str):
    """The old lines take the newer lines' uids in the file of both: the links that wait for the
    uids the stopped import knew them by follow them."""
    monkeypatch.setattr(transfer, "IMPORT_BATCH", 2)
    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        _merged_episode(robot, clock)
        expected = _links(robot)
        robot.export(tmp_path / "new.jsonl")
    (_without_uids if old_lines == "without uids" else _provisional_uids)(tmp_path / "new.jsonl",
                                                                          tmp_path / "old.jsonl")
    header = (tmp_path / "new.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[0]
    _one_file(tmp_path / "both.jsonl", header, _body(tmp_path / "new.jsonl"), _body(tmp_path / "old.jsonl"))

    def stop(done: int) -> None:
        raise RuntimeError(done)

    monkeypatch.setattr(transfer, "_after_batch", stop)
    with pytest.raises(RuntimeError):
        mem.import_(tmp_path / "old.jsonl")  # the kept fact's absorbed waits for the merged fact
    monkeypatch.setattr(transfer, "_after_batch", None)
    counts = mem.import_(tmp_path / "both.jsonl")
    assert (counts["memories"], counts["skipped"]) == (3, 7)
    assert _links(mem) == expected
    with mem.store.read() as conn:
        assert conn.execute("SELECT count(*) FROM import_links").fetchone()[0] == 0


# -- a file cut short: export replaces the file whole, import refuses what lacks its end ---------------


def _cut(source: Path, target: Path, keep: int) -> None:
    """The first ``keep`` lines of ``source``: the file an export or a copy stopped at a line boundary leaves."""
    target.write_text("".join(source.read_text(encoding="utf-8").splitlines(keepends=True)[:keep]),
                      encoding="utf-8")


def test_an_export_ends_with_an_end_record_counting_what_it_wrote(tmp_path: Path, mem: Memory):
    _episode(mem)
    assert mem.export(tmp_path / "e.jsonl") == {"sessions": 1, "memories": 5}
    lines = _lines(tmp_path / "e.jsonl")
    assert lines[0] == {"kind": "header", "format": "robotmem-export/2"}
    assert lines[-1] == {"kind": "end", "sessions": 1, "memories": 5}
    assert len(lines) == 1 + 1 + 5 + 1


@pytest.mark.parametrize("keep", [1, 2, 4, 7], ids=["header", "sessions", "some memories", "all but the end"])
def test_a_file_cut_short_at_a_line_boundary_is_refused_naming_it(tmp_path: Path, mem: Memory, keep: int):
    with Memory(tmp_path / "robot.db", embedder=None) as robot:
        _episode(robot)
        robot.export(tmp_path / "e.jsonl")
    _cut(tmp_path / "e.jsonl", tmp_path / "cut.jsonl", keep)
    before = mem.stats()
    with pytest.raises(ValidationError, match=rf"cut\.jsonl: nothing imported: the file stops at line {keep} without "
                                              r"the end record .* cut short") as refused:
        mem.import_(tmp_path / "cut.jsonl")
    assert refused.value.field == "path"
    assert mem.stats()["memories"] == before["memories"] == 0 and mem.stats()["sessions"] == before["sessions"]
    # Told to, it takes what is there; the whole file afterwards adds the rest, each memory once.
    counts = mem.import_(tmp_path / "cut.jsonl", allow_incomplete=True)
    assert counts["memories"] == max(0, keep - 2)
    counts = mem.import_(tmp_path / "e.jsonl")
    assert (counts["memories"], counts["skipped"]) == (5 - max(0, keep - 2), max(0, keep - 2))


def test_an_end_record_counting_other_numbers_is_refused(tmp_path: Path, mem: Memory):
    with Memory(tmp_path / "robot.db", embedder=None) as robot:
        _episode(robot)
        robot.export(tmp_path / "e.jsonl")
    lines = (tmp_path / "e.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "lost.jsonl").write_text("".join(lines[:3] + lines[5:]), encoding="utf-8")  # two memories lost
    with pytest.raises(ValidationError, match=r"lost\.jsonl: nothing imported: line 6: the end record counts 1 "
                                              r"sessions and 5 memories, .* holds 1 and 3 \(2 memories missing"):
        mem.import_(tmp_path / "lost.jsonl")
    (tmp_path / "after.jsonl").write_text("".join(lines + lines[3:4]), encoding="utf-8")
    with pytest.raises(ValidationError, match=r"line 9: a memory record after the end record of line 8"):
        mem.import_(tmp_path / "after.jsonl")
    assert mem.stats()["memories"] == 0


def test_an_export_of_an_earlier_version_without_an_end_record_imports_with_a_warning(tmp_path: Path, mem: Memory,
                                                                                     caplog):
    with Memory(tmp_path / "robot.db", embedder=None) as robot:
        _episode(robot)
        robot.export(tmp_path / "e.jsonl")
    lines = [line for line in _lines(tmp_path / "e.jsonl") if line["kind"] != "end"]
    lines[0]["format"] = "robotmem-export/1"
    (tmp_path / "old.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    with caplog.at_level("WARNING", logger="robotmem.transfer"):
        assert mem.import_(tmp_path / "old.jsonl")["memories"] == 5
    assert "old.jsonl: written by an earlier robotmem (robotmem-export/1" in caplog.text
    assert "cannot be checked" in caplog.text


def test_exports_joined_into_one_file_are_each_checked_against_their_own_end_record(tmp_path: Path, mem: Memory):
    for name in ("a", "b"):
        with Memory(tmp_path / f"{name}.db", embedder=None) as robot:
            _episode(robot)
            robot.export(tmp_path / f"{name}.jsonl")
    a, b = ((tmp_path / f"{name}.jsonl").read_text(encoding="utf-8") for name in ("a", "b"))
    (tmp_path / "cut.jsonl").write_text(a[: a.rindex('{"kind": "end"')] + b, encoding="utf-8")
    with pytest.raises(ValidationError, match=r"the export of line 1 stops at line 7 without the end record"):
        mem.import_(tmp_path / "cut.jsonl")
    (tmp_path / "ab.jsonl").write_text(a + b, encoding="utf-8")  # cat a.jsonl b.jsonl
    counts = mem.import_(tmp_path / "ab.jsonl")
    assert counts["memories"] + counts["skipped"] == 10  # b's facts are a's (learn's rule: one live copy)


def test_a_failed_export_leaves_the_previous_file_and_no_temporary_file(tmp_path: Path, mem: Memory, monkeypatch):
    _episode(mem)
    out = tmp_path / "backups"
    out.mkdir()
    (out / "e.jsonl").write_text("the previous backup\n")
    (out / "e.jsonl").chmod(0o640)
    calls = 0

    def fail(*args, **kwargs):
        nonlocal calls
        calls += 1
        raise KeyboardInterrupt

    monkeypatch.setattr(type(mem.store), "iter_rows", fail)
    with pytest.raises(KeyboardInterrupt):
        mem.export(out / "e.jsonl")
    assert calls == 1
    assert (out / "e.jsonl").read_text() == "the previous backup\n"
    assert sorted(p.name for p in out.iterdir()) == ["e.jsonl"]
    monkeypatch.undo()
    mem.export(out / "e.jsonl")
    assert _lines(out / "e.jsonl")[-1]["kind"] == "end"
    assert (out / "e.jsonl").stat().st_mode & 0o777 == 0o640  # the permissions it had
    assert sorted(p.name for p in out.iterdir()) == ["e.jsonl"]


def test_an_export_through_a_symlink_writes_the_file_it_names(tmp_path: Path, mem: Memory):
    _episode(mem)
    (tmp_path / "backups").mkdir()
    (tmp_path / "backups" / "monday.jsonl").write_text("old\n")
    (tmp_path / "latest.jsonl").symlink_to(tmp_path / "backups" / "monday.jsonl")
    mem.export(tmp_path / "latest.jsonl")
    assert (tmp_path / "latest.jsonl").is_symlink()
    assert _lines(tmp_path / "backups" / "monday.jsonl")[-1] == {"kind": "end", "sessions": 1, "memories": 5}


def test_export_and_import_take_open_text_streams(tmp_path: Path, mem: Memory):
    import io

    _episode(mem)
    out = io.StringIO()
    assert mem.export(out)["memories"] == 5
    with Memory(tmp_path / "copy.db", embedder=None) as copy:
        assert copy.import_(io.StringIO(out.getvalue()))["memories"] == 5
        with pytest.raises(ValidationError, match=r"standard input: nothing imported: the file stops at line 3"):
            copy.import_(io.StringIO("".join(out.getvalue().splitlines(keepends=True)[:3])))
        with pytest.raises(ValidationError, match="allow_incomplete must be true or false"):
            copy.import_(io.StringIO(out.getvalue()), allow_incomplete="yes")


def test_an_export_with_a_word_past_postgresqls_lexeme_limit_imports_and_is_found(tmp_path: Path, mem: Memory):
    word = "ж" * 1100  # 2,200 bytes; PostgreSQL takes lexemes of at most 2,046 (tokens are cut there)
    with Memory(tmp_path / "source.db", embedder=None) as source:
        source.save_perceptions([{"description": "camera frame 1"}, {"description": word}])
        source.export(tmp_path / "e.jsonl")
    assert mem.import_(tmp_path / "e.jsonl")["memories"] == 2
    assert [h["content"] for h in mem.recall(word, min_relevance=0)["results"]] == [word]


# -- lines that pass JSON but cannot be written: refused before anything is written ----------------------


def _payload_line(data: Any) -> str:
    import base64

    import msgpack

    return base64.b64encode(msgpack.packb(data, use_bin_type=True)).decode("ascii")


def _episode_export(tmp_path: Path) -> Path:
    """An export of another store: one ended session, a fact and a perception with data."""
    with Memory(tmp_path / "robot.db", embedder=None) as robot:
        sid = robot.start_session()["session_id"]
        robot.learn("the left door sticks", session_id=sid)
        robot.save_perception("gripper force trace", "tactile", data={"f": [1.0, 2.0]}, session_id=sid)
        robot.end_session(sid, 0.5)
        robot.export(tmp_path / "e.jsonl")
    return tmp_path / "e.jsonl"


@pytest.mark.parametrize("kind, change, field", [
    ("memory", {"evidence_count": 2**64}, "evidence_count"),
    ("memory", {"access_count": 2**63}, "access_count"),
    ("memory", {"confidence": 10**400}, "confidence"),
    ("memory", {"payload": _payload_line({b"k": 1})}, "payload"),
    ("memory", {"payload": _payload_line({"k": [{"deep": {b"k": 1}}]})}, "payload"),
    ("memory", {"payload": _payload_line({"k": __import__("msgpack").ExtType(5, b"xx")})}, "payload"),
    ("session", {"summary": {"note": "\ud800"}}, "summary.note"),
    ("session", {"summary": {"\ud800": 1}}, "summary"),
    ("session", {"summary": {"n": 2**64}}, "summary.n"),
    ("session", {"outcome_score": 10**400}, "outcome_score"),
], ids=["evidence_count", "access_count", "confidence", "payload bytes key", "payload deep bytes key",
        "payload ext type", "summary surrogate", "summary surrogate key", "summary integer", "outcome_score"])
def test_a_line_the_store_cannot_take_refuses_the_file_before_anything_is_written(
        tmp_path: Path, mem: Memory, kind: str, change: dict, field: str):
    """Such lines passed the checks and failed while writing (OverflowError, "integer out of range",
    a TypeError of the payload summary's JSON) after the sessions were committed; a lone surrogate
    in a summary was stored and then broke every export and session listing."""
    path = _episode_export(tmp_path)
    lines = _lines(path)
    line = next(i for i, r in enumerate(lines) if r["kind"] == kind and (kind == "session" or r["payload"]))
    lines[line].update(change)
    _write_lines(path, lines)
    with pytest.raises(ValidationError, match=rf"nothing imported, 1 bad line\(s\): line {line + 1}: "
                                              rf"{field.split('.')[0]}"):
        mem.import_(path)
    stats = mem.stats()
    assert (stats["sessions"], stats["memories"]) == (0, 0)


def test_a_summary_an_older_version_stored_with_a_lone_surrogate_is_read_without_it(tmp_path: Path, mem: Memory):
    """Imports before summaries were checked stored one as given: it must not break the export, the
    session readers (or the MCP server) for good. Read as U+FFFD, the export imports again."""
    sid = mem.start_session()["session_id"]
    mem.end_session(sid, 0.5)
    with mem.store.write() as conn:
        conn.execute("UPDATE sessions SET summary = ? WHERE id = ?",
                     (json.dumps({"note": "a\ud800b", "emoji": "\U0001f600", "\udfff": 1}), sid))
    expected = {"note": "a\ufffdb", "emoji": "\U0001f600", "\ufffd": 1}
    assert mem.get_session(sid)["summary"] == expected
    assert mem.list_sessions()[0]["summary"] == expected
    assert mem.end_session(sid)["note"] == "a\ufffdb"  # already ended: answers with the stored summary
    mem.export(tmp_path / "e.jsonl")
    with Memory(tmp_path / "copy.db", embedder=None) as copy:
        assert copy.import_(tmp_path / "e.jsonl")["sessions"] == 1
        assert copy.get_session(sid)["summary"] == expected


def test_import_leaves_a_memory_updated_while_it_embedded_to_that_update(tmp_path: Path, db_path: Any):
    """Import stores the records, then embeds those without a vector: an update of an imported
    memory in between (which stores its new text's vector) must not get the old text's vector."""
    with Memory(tmp_path / "source.db", embedder=None) as source:
        source.learn("the charger is in the kitchen")
        source.export(tmp_path / "e.jsonl")
    with Memory(db_path, embedder=TextVectors()) as other:

        def update_it() -> None:
            with other._db.read() as conn:
                (mid,) = conn.execute("SELECT id FROM memories WHERE content = ?",
                                      ("the charger is in the kitchen",)).fetchone()
            other.update(int(mid), "the charger is in room 12")

        with Memory(db_path, embedder=TextVectors("the charger is in the kitchen", update_it)) as mem:
            counts = mem.import_(tmp_path / "e.jsonl")
            assert (counts["memories"], counts["embedded"]) == (1, 0)
            hit = mem.recall("charger room", min_relevance=0)["results"][0]
            assert hit["content"] == "the charger is in room 12"
            with mem._db.read() as conn:
                (blob,) = conn.execute("SELECT vector FROM embeddings WHERE memory_id = ?", (hit["id"],)).fetchone()
            new = TextVectors().embed(["the charger is in room 12"])[0]
            assert np.allclose(np.frombuffer(as_vector_bytes(blob) or b"", dtype=np.float32), new / np.linalg.norm(new))


@pytest.mark.parametrize("as_stream", [False, True], ids=["path", "stream"])
def test_import_holds_one_batch_of_payloads_not_the_file(tmp_path: Path, mem: Memory, clock, monkeypatch, as_stream):
    """An import held every record of the file, payloads and vectors included, until its last batch was
    written: 850 MB to import 100,000 memories (7 KB each), more than a small board has for 1,000,000.
    Measured against this file's own payload bytes with tracemalloc: the import may hold a few batches
    of them, not the file's."""
    import tracemalloc

    monkeypatch.setattr(transfer, "IMPORT_BATCH", 10)
    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        for start in range(0, 600, 50):
            robot.save_perceptions([{"description": f"scan {i} of the left shelf", "perception_type": "visual",
                                     "data": {"ranges": [float(i) + j / 7 for j in range(3000)]}}
                                    for i in range(start, start + 50)])
        robot.export(tmp_path / "e.jsonl")
    with (tmp_path / "e.jsonl").open(encoding="utf-8") as lines:
        payload_bytes = sum(len(json.loads(line).get("payload") or "") * 3 // 4 for line in lines)
    tracemalloc.start()
    try:
        if as_stream:
            with (tmp_path / "e.jsonl").open(encoding="utf-8") as stream:
                counts = mem.import_(stream)
        else:
            counts = mem.import_(tmp_path / "e.jsonl")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert counts["memories"] == 600
    assert len(mem.get_data(_all_ids(mem)[-1])["ranges"]) == 3000
    assert peak < 0.25 * payload_bytes, f"importing {payload_bytes / 1e6:.1f} MB of payloads peaked at {peak / 1e6:.1f} MB"


@pytest.mark.sqlite_only
def test_an_import_writes_the_missing_vector_snapshot_and_leaves_a_fresh_one(tmp_path: Path, monkeypatch):
    """An import of a large collection left it without its vector snapshot, so the first recall of every
    process (a server started next) loaded an exact mirror of the whole collection: 1.9 GB at
    1,000,000 memories. The import writes the snapshot, as PostgreSQL's builds its HNSW index at its
    end; a small import into a store whose snapshot is fresh does not write it again."""
    from robotmem.search import ann_index

    monkeypatch.setattr(ann_index, "MIN_ROWS", 60)
    with Memory(tmp_path / "robot.db", embedder=TextVectors()) as robot:
        robot.save_perceptions([{"description": f"contact {i} on the left finger pad"} for i in range(80)])
        robot.export(tmp_path / "e.jsonl")
        robot.save_perceptions([{"description": f"contact {i} on the right finger pad"} for i in range(80, 83)])
        robot.export(tmp_path / "more.jsonl")
    with Memory(tmp_path / "memory.db", embedder=TextVectors()) as mem:
        mem.import_(tmp_path / "e.jsonl")
        [state] = mem.stats()["vector_indexes"]
        assert state["built"] and state["changes_since"] == 0 and not state["stale"]
        assert mem.import_(tmp_path / "more.jsonl")["memories"] == 3
        [later] = mem.stats()["vector_indexes"]
        assert later["snapshot_seq"] == state["snapshot_seq"] and later["changes_since"] == 3


@pytest.mark.sqlite_only
def test_an_import_whose_vector_snapshot_cannot_be_written_is_stored_and_says_so(tmp_path: Path, monkeypatch, caplog):
    """Writing the snapshot at the end of a bulk load failed out of the load (here NotADirectoryError:
    the store's .vectors folder is a file), after every record was stored: the import, a replay or a
    bulk writer's close raised as if it had failed. The load returns; a warning says what to run."""
    from robotmem.search import ann_index

    monkeypatch.setattr(ann_index, "MIN_ROWS", 60)
    with Memory(tmp_path / "robot.db", embedder=TextVectors()) as robot:
        robot.save_perceptions([{"description": f"contact {i} on the left finger pad"} for i in range(80)])
        robot.export(tmp_path / "e.jsonl")
    (tmp_path / "memory.db.vectors").write_text("not a folder")
    with Memory(tmp_path / "memory.db", embedder=TextVectors()) as mem, caplog.at_level("WARNING", logger="robotmem"):
        assert mem.import_(tmp_path / "e.jsonl")["memories"] == 80
        with mem.bulk_writer() as writer:
            writer.save_perceptions([{"description": "contact 80 on the right finger pad"}])
        # and the store still answers: stats says the snapshot is missing, recall ranks exactly
        [state] = mem.stats()["vector_indexes"]
        assert not state["built"] and not state["building"]
        assert mem.recall("contact 7 on the left finger pad", min_relevance=0)["count"] > 0
    assert caplog.text.count("the vector snapshot could not be written") == 2
    assert "robotmem reindex" in caplog.text
    assert apsw.Connection(str(tmp_path / "memory.db")).execute("SELECT count(*) FROM embeddings").fetchone() == (81,)


def _traced_peak(import_: Any) -> tuple[dict[str, int], int]:
    import tracemalloc

    tracemalloc.start()
    try:
        counts = import_()
        return counts, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_what_import_holds_does_not_grow_with_the_file(tmp_path: Path, mem: Memory, clock, monkeypatch):
    """The checks across the file (uids, sessions, the old rule, links) kept about 1.4 KB in Python for
    every memory line until the import ended: 1.5 GB of resident memory to import 1,000,000 on a board
    with a few GB (docs/reliability.md, "Memory on small boards"). Measured here as tracemalloc's peak
    of imports of two sizes, in each case import meets: into a store without them, the same files
    again (every record found by uid), and files written before uids (every line found by the old
    rule). Before, the peak grew by 1.3-1.5 KB a line in each case; a batch's records are all it may
    hold. A first import warms the process's caches (bounded ones, filling) untraced, and each peak is
    the least of two imports: another thread's allocations during one (a store of an earlier test
    closing) only add to it."""
    monkeypatch.setattr(transfer, "IMPORT_BATCH", 50)
    monkeypatch.setattr(transfer, "IMPORT_PAUSE_MAX_S", 0)  # no other writer waits here
    monkeypatch.setattr(transfer, "_UID_LOOKUP", 50)  # both sizes span many chunks of the uid check, as of batches
    sizes = {"small": 300, "large": 2000}
    files: dict[str, Path] = {}
    for name, n in {"warm-up": 1000, "small": 300, "small-2": 300, "large": 2000, "large-2": 2000}.items():
        with Memory(tmp_path / f"{name}.db", clock=clock, embedder=None) as robot:
            robot.save_perceptions([{"description": f"{name} robot: joint state sample {i}",
                                     "perception_type": "proprioceptive", "data": {"q": [0.1 * i] * 6},
                                     "occurred_at": 1_700_000_000 + i, "embed": False} for i in range(n)])
            robot.export(tmp_path / f"{name}.jsonl")
        _without_uids(tmp_path / f"{name}.jsonl", tmp_path / f"{name}-old.jsonl")
        files[name] = tmp_path / f"{name}.jsonl"
        files[f"{name}-old"] = tmp_path / f"{name}-old.jsonl"
    assert mem.import_(files["warm-up"])["memories"] == 1000
    growth = {}
    # "into the store": the second of each size is another robot's file, so that it is stored too.
    for case, second, suffix, stored in (("into the store", "-2", "", True), ("again", "", "", False),
                                         ("without uids", "", "-old", False)):
        peaks = {}
        for name, n in sizes.items():
            for file in (files[name + suffix], files[name + second + suffix]):
                counts, peak = _traced_peak(lambda: mem.import_(file))
                assert (counts["memories"], counts["skipped"]) == ((n, 0) if stored else (0, n)), case
                peaks[name] = min(peak, peaks.get(name, peak))
        growth[case] = round((peaks["large"] - peaks["small"]) / (sizes["large"] - sizes["small"]))
    assert len(_all_ids(mem)) == 1000 + 2 * sum(sizes.values())
    assert all(per_line < 100 for per_line in growth.values()), f"bytes held per memory line: {growth}"


def test_a_temporary_folder_without_room_for_the_import_s_index_is_named_and_nothing_is_imported(
        tmp_path: Path, mem: Memory, clock, monkeypatch):
    """The import's index of the file's lines is written to SQLite's temporary folder: when that is
    full (here: a file-size limit the index outgrows), the import says so and what to do, before it
    stores anything, instead of SQLite's bare "disk I/O error"."""
    import resource

    from robotmem import import_index
    from robotmem.errors import StorageError

    with Memory(tmp_path / "robot.db", clock=clock, embedder=None) as robot:
        robot.save_perceptions(_samples(3000))
        robot.export(tmp_path / "e.jsonl")
    monkeypatch.setattr(import_index, "_CACHE_KIB", 64)  # spills to its file after a few hundred lines
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, limit[1]))
    try:
        with pytest.raises(StorageError) as refused:
            mem.import_(tmp_path / "e.jsonl")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limit)
    assert "import's temporary index could not be written (File too large)" in refused.value.message
    assert "SQLITE_TMPDIR" in refused.value.message
    assert _all_ids(mem) == []
    assert mem.import_(tmp_path / "e.jsonl")["memories"] == 3000
