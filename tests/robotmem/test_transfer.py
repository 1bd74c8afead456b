import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robotmem import Memory

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
