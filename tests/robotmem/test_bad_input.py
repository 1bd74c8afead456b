"""Bad input to any public method raises a RobotMemError that names the field; nothing else escapes."""

import json
from pathlib import Path

import pytest

from robotmem import Memory, RobotMemError, StorageError, ValidationError

CALLS = [
    ("recall", lambda m, tmp: m.recall("x", context_filter={5: 1}), "context_filter"),
    ("recall", lambda m, tmp: m.recall("x", context_filter={"a": {"$eq": 2**70}}), "context_filter.a.$eq"),
    ("recall", lambda m, tmp: m.recall("x", spatial_sort={"field": "a.b", "target": [1, float("nan")]}),
     "spatial_sort.target"),
    ("recall", lambda m, tmp: m.recall("x", spatial_sort={"field": "a.b", "target": [1, 2],
                                                          "max_distance": float("nan")}), "spatial_sort.max_distance"),
    ("recall", lambda m, tmp: m.recall("x", since="nan"), "since"),
    ("recall", lambda m, tmp: m.recall("x", until="inf"), "until"),
    ("recall", lambda m, tmp: m.recall("x", spatial_sort={"field": 3, "target": [1, 2]}), "spatial_sort.field"),
    ("recall", lambda m, tmp: m.recall("x", n=True), "n"),
    ("learn", lambda m, tmp: m.learn("x", {"a": 2**70}), "context.a"),
    ("learn", lambda m, tmp: m.learn("x", []), "context"),
    ("learn", lambda m, tmp: m.learn("x", session_id=5), "session_id"),
    ("save_perception", lambda m, tmp: m.save_perception("valid text", data=object()), "data"),
    ("forget", lambda m, tmp: m.forget("3", "x"), "memory_id"),
    ("export", lambda m, tmp: m.export(tmp / "missing" / "x.jsonl"), "path"),
    ("export", lambda m, tmp: m.export(5), "path"),
    ("export", lambda m, tmp: m.export(tmp), "path"),
    ("import_", lambda m, tmp: m.import_(tmp / "nope.jsonl"), "path"),
    ("reindex", lambda m, tmp: m.reindex(batch_size=0), "batch_size"),
    ("reindex", lambda m, tmp: m.reindex(progress=5), "progress"),
    ("consolidate", lambda m, tmp: m.consolidate(progress=5), "progress"),
    # A NUL or a surrogate that stands for no byte failed in open() as ValueError / UnicodeEncodeError.
    ("export", lambda m, tmp: m.export(str(tmp / "x\x00")), "path"),
    ("export", lambda m, tmp: m.export(str(tmp / "x\ud83d")), "path"),
    ("import_", lambda m, tmp: m.import_(str(tmp / "x\x00")), "path"),
    ("import_", lambda m, tmp: m.import_(str(tmp / "x\ud83d")), "path"),
    # "\udcff": how a command line's byte 0xff (not UTF-8) arrives; the store keeps UTF-8.
    ("learn", lambda m, tmp: m.learn("\udcff\udcfe bad bytes"), "insight"),
    ("save_perception", lambda m, tmp: m.save_perception("gripper camera \ud800 frame"), "description"),
    ("forget", lambda m, tmp: m.forget(1, "\udcff"), "reason"),
    ("recall", lambda m, tmp: m.recall("grip \udcff"), "query"),
    ("outcome_stats", lambda m, tmp: m.outcome_stats("params.\udcff"), "group_by"),
    ("outcome_stats", lambda m, tmp: m.outcome_stats("params.f", query="grip \udcff"), "query"),
    # An int beyond float's range overflowed in float() before the range check.
    ("recall", lambda m, tmp: m.recall("x", min_confidence=10**400), "min_confidence"),
    ("end_session", lambda m, tmp: m.end_session("ses_1", -(10**400)), "outcome_score"),
]


@pytest.mark.parametrize("name, call, field", CALLS, ids=[f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(CALLS)])
def test_bad_input_is_a_validation_error_naming_the_field(hybrid_mem: Memory, tmp_path: Path, name, call, field):
    with pytest.raises(ValidationError) as info:
        call(hybrid_mem, tmp_path)
    assert info.value.field == field


def test_an_update_with_undecodable_bytes_names_new_content(mem: Memory):
    memory_id = mem.learn("the gripper slipped on the wet bottle")["memory_id"]
    with pytest.raises(ValidationError) as info:
        mem.update(memory_id, "\udcff\udcfe bad bytes")
    assert info.value.field == "new_content"
    assert mem.get(memory_id)["content"] == "the gripper slipped on the wet bottle"


def test_an_import_record_missing_fields_names_the_line(mem: Memory, tmp_path: Path):
    dump = tmp_path / "bad.jsonl"
    dump.write_text(json.dumps({"kind": "header", "format": "robotmem-export/1"}) + "\n"
                    + json.dumps({"kind": "memory", "content": "x"}) + "\n")
    with pytest.raises(ValidationError, match="bad.jsonl: nothing imported.*line 2"):
        mem.import_(dump)


def test_an_import_line_that_is_not_utf8_is_a_bad_line_and_nothing_is_imported(mem: Memory, tmp_path: Path):
    mem.learn("the gripper slipped on the wet bottle")
    dump = tmp_path / "mixed.jsonl"
    mem.export(dump)
    with dump.open("ab") as out:
        out.write(b'{"kind": "memory", "content": "caf\xe9"}\n')
    lines = len(dump.read_bytes().splitlines())
    with Memory(tmp_path / "other.db", embedder=None) as other:
        with pytest.raises(ValidationError, match=rf"mixed.jsonl: nothing imported.*line {lines}: not UTF-8.*0xe9"):
            other.import_(dump)
        assert other.stats()["memories"] == 0


@pytest.mark.parametrize("kwargs, field", [
    ({"path": 123}, "path"), ({"embedder": "foo"}, "embedder"), ({"embedder": 5}, "embedder"),
    ({"clock": "x"}, "clock"), ({"config": {"collection": "x"}}, "config"),
    # SQLite refused these with a bare ValueError / UnicodeEncodeError; "\udcff" (byte 0xff) is
    # a name the OS takes but SQLite, which wants UTF-8, does not.
    ({"path": "m\x00.db"}, "path"), ({"path": "m\ud83d.db"}, "path"), ({"path": "m\udcff.db"}, "path"),
])
def test_bad_constructor_arguments_are_validation_errors(tmp_path: Path, kwargs, field):
    if isinstance(kwargs.get("path"), str):
        kwargs["path"] = str(tmp_path / kwargs["path"])
    kwargs.setdefault("path", tmp_path / "m.db")
    with pytest.raises(ValidationError) as info:
        Memory(**kwargs)
    assert info.value.field == field
    if field != "embedder":  # the embedder is resolved once the store is open
        assert not list(tmp_path.glob("m*"))  # refused before a store file was made


@pytest.mark.parametrize("reading", ["now", float("nan"), float("inf"), None, True, 1e300, -1.0, 253402300800, 10**400])
def test_a_clock_that_reads_no_finite_time_is_a_validation_error_and_nothing_is_written(tmp_path: Path, reading):
    # "now" failed float() inside learn (ValueError); NaN reached a NOT NULL column (StorageError).
    path = tmp_path / "m.db"
    with Memory(path, clock=lambda: reading, embedder=None) as mem:
        for call in (lambda: mem.learn("the gripper slipped on the wet bottle"),
                     lambda: mem.save_perception("gripper camera frame 1"), mem.start_session):
            with pytest.raises(ValidationError) as info:
                call()
            assert info.value.field == "clock"
    with Memory(path, embedder=None) as mem:
        assert (mem.stats()["memories"], mem.stats()["sessions"]) == (0, 0)


def test_an_unusable_store_location_is_a_storage_error(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(StorageError):
        Memory(blocker / "sub" / "m.db", embedder=None)


def test_a_duplicate_into_an_ended_session_is_still_a_conflict(mem: Memory):
    sid = mem.start_session()["session_id"]
    mem.learn("cafe robot served 3 cups", session_id=sid)
    mem.end_session(sid)
    with pytest.raises(RobotMemError) as info:
        mem.learn("cafe robot served 3 cups", session_id=sid)
    assert info.value.code == "conflict"


def test_the_configured_collection_is_the_default(robotmem_home: Path):
    (robotmem_home / "config.json").write_text(json.dumps({"collection": "lab-file"}))
    with Memory(embedder=None) as mem:
        assert mem.collection == "lab-file"
        mid = mem.learn("door 4 sticks")["memory_id"]
        assert mem.get(mid)["collection"] == "lab-file"
