"""end_session as a whole: the summary, the outcome, repeat calls, unknown ids, atomicity."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
import threading
from pathlib import Path

import apsw
import pytest
from conftest import Episode

from robotmem import Memory, NotFoundError, StorageError, ValidationError

SUMMARY_FIELDS = {"session_id", "status", "duration_s", "memories", "perceptions", "merged", "reinforced",
                  "decayed", "archived", "related"}


def store_fingerprint(db_path: Path | str) -> str:
    """A digest of every row of the tables end_session may change (read by the database's own client)."""
    digest = hashlib.sha256()
    if str(db_path).startswith("postgresql://"):
        import psycopg

        with psycopg.connect(str(db_path)) as pg:
            for table in ("sessions", "memories"):
                for row in pg.execute(f"SELECT * FROM {table} ORDER BY 1"):
                    digest.update(repr(row).encode())
        return digest.hexdigest()
    conn = apsw.Connection(str(db_path))
    try:
        for table in ("sessions", "memories", "change_log"):
            for row in conn.execute(f"SELECT * FROM {table} ORDER BY rowid"):
                digest.update(repr(row).encode())
        return digest.hexdigest()
    finally:
        conn.close()


def fail_closing_sessions(db_path: Path | str) -> Callable[[], None]:
    """A real fault inside end_session's transaction: the database aborts the final UPDATE of the
    session. Returns the function that removes the fault."""
    if str(db_path).startswith("postgresql://"):
        import psycopg

        admin = psycopg.connect(str(db_path), autocommit=True)
        admin.execute("CREATE FUNCTION fail_close() RETURNS trigger LANGUAGE plpgsql AS "
                      "$$ BEGIN RAISE EXCEPTION 'injected failure'; END $$")
        admin.execute("CREATE TRIGGER fail_close BEFORE UPDATE OF ended_at ON sessions "
                      "FOR EACH ROW EXECUTE FUNCTION fail_close()")

        def undo_pg() -> None:
            admin.execute("DROP TRIGGER fail_close ON sessions")
            admin.close()
        return undo_pg
    conn = apsw.Connection(str(db_path))
    conn.execute("CREATE TRIGGER fail_close BEFORE UPDATE OF ended_at ON sessions "
                 "BEGIN SELECT RAISE(ABORT, 'injected failure'); END")

    def undo() -> None:
        conn.execute("DROP TRIGGER fail_close")
        conn.close()
    return undo


def test_the_summary_reports_every_field(mem: Memory, episode: Episode, clock):
    sid, _ = episode(mem, [("the bin lid sticks", None), ("The bin lid sticks.", None)], step_s=5)
    mem.save_perception("camera sees the bin", session_id=sid)
    clock.advance(20)
    summary = mem.end_session(sid, outcome_score=0.9)
    assert SUMMARY_FIELDS <= set(summary)
    assert summary["status"] == "ended" and summary["session_id"] == sid
    assert summary["duration_s"] == 30.0 and summary["memories"] == 2 and summary["perceptions"] == 1
    assert summary["merged"] == 1 and summary["outcome_score"] == 0.9


def test_the_outcome_is_stored_and_recall_can_filter_on_it(mem: Memory, episode: Episode):
    good, (a,) = episode(mem, [("push the drawer with the flat gripper", {"task": {"success": True}})])
    mem.save_perception("drawer closed fully", session_id=good)
    bad, (b,) = episode(mem, [("push the drawer with the hook", {"task": {"success": True}})])
    mem.end_session(good, outcome_score=0.9)
    mem.end_session(bad, outcome_score=0.3)
    assert mem.get_session(good)["outcome_score"] == 0.9
    assert mem.get(a)["context"]["episode"] == {"outcome": 0.9}
    hits = mem.recall("push the drawer", n=10, context_filter={"episode.outcome": {"$gte": 0.8},
                                                              "task.success": True})["results"]
    assert [h["id"] for h in hits] == [a]
    perceptions = mem.recall("drawer", n=10, context_filter={"episode.outcome": {"$gte": 0.8}})["results"]
    assert {h["type"] for h in perceptions} == {"fact", "perception"}
    assert mem.get(b)["context"]["episode"]["outcome"] == 0.3


@pytest.mark.parametrize("score", [0.0, 1.0])
def test_a_whole_outcome_reads_back_as_a_float(mem: Memory, episode: Episode, score: float, tmp_path: Path):
    # PostgreSQL wrote the score as a float8, which jsonb spells "0": it read back as the integer 0.
    sid, (mid,) = episode(mem, [("push the drawer with the flat gripper", {"task": {"success": True}})])
    learned_int, = episode(mem, [("pull the drawer with the hook", {"episode": {"outcome": int(score)}})])[1]
    mem.end_session(sid, outcome_score=score)
    outcome = mem.get(mid)["context"]["episode"]["outcome"]
    assert outcome == score and type(outcome) is float
    hit = mem.recall("push the drawer", n=1, context_filter={"episode.outcome": score})["results"][0]
    assert hit["id"] == mid and type(hit["context"]["episode"]["outcome"]) is float
    mem.export(tmp_path / "e.jsonl")
    exported = [json.loads(line) for line in (tmp_path / "e.jsonl").read_text().splitlines()]
    record = next(r for r in exported if r.get("content") == "push the drawer with the flat gripper")
    assert type(record["context"]["episode"]["outcome"]) is float
    # A caller's own integer stays an integer (its session has no score here).
    kept = mem.get(learned_int)["context"]["episode"]["outcome"]
    assert kept == int(score) and type(kept) is int


def test_without_a_score_no_outcome_is_attached(mem: Memory, episode: Episode):
    sid, (mid,) = episode(mem, [("the west door is locked at night", None)])
    mem.end_session(sid)
    assert "episode" not in mem.get(mid)["context"] and mem.get_session(sid)["outcome_score"] is None


def test_an_episode_key_that_is_not_an_object_is_left_alone(mem: Memory, episode: Episode):
    sid, (mid,) = episode(mem, [("run 12 used the spare battery", {"episode": "run-12"})])
    mem.end_session(sid, outcome_score=0.5)
    assert mem.get(mid)["context"]["episode"] == "run-12"


def test_an_outcome_the_caller_gave_is_kept_and_the_memory_is_still_its_fact(mem: Memory, episode: Episode):
    # end_session wrote its score over the caller's 0.25: the value was lost, and an update
    # without a context then hashed the context without any outcome, so a learn of the new text
    # with the caller's context made a second live copy.
    given = {"robot": {"id": "arm-1"}, "episode": {"outcome": 0.25}}
    sid, (mine, none, text, other) = episode(mem, [
        ("gripper pad holds the ceramic mug", given),
        ("gripper pad holds the glass", {"episode": {"outcome": None}}),
        ("gripper pad holds the bowl", {"episode": {"outcome": "partial"}}),
        ("gripper pad holds the tray", {"episode": {"trial": 4}}),
    ])
    mem.end_session(sid, outcome_score=1.0)
    assert mem.get_session(sid)["outcome_score"] == 1.0
    assert [mem.get(m)["context"]["episode"] for m in (mine, none, text, other)] == [
        {"outcome": 0.25}, {"outcome": None}, {"outcome": "partial"}, {"trial": 4, "outcome": 1.0}]
    hits = mem.recall("gripper pad", n=10, context_filter={"episode.outcome": 0.25})["results"]
    assert [h["id"] for h in hits] == [mine]
    mem.update(mine, "gripper pad holds the ceramic mug handle")
    assert mem.get(mine)["context"] == given
    assert mem.learn("gripper pad holds the ceramic mug handle", given) == {"memory_id": mine, "status": "duplicate"}
    # Offline consolidation writes the score again only where no outcome is: not over a value
    # an update's new context gave.
    mem.update(other, "gripper pad holds the tray edge", {"episode": {"outcome": 0.6}})
    mem.consolidate()
    assert [mem.get(m)["context"]["episode"] for m in (mine, none, text, other)] == [
        {"outcome": 0.25}, {"outcome": None}, {"outcome": "partial"}, {"outcome": 0.6}]


def test_ending_twice_returns_the_first_summary_and_changes_nothing(mem: Memory, episode: Episode, clock, db_path):
    sid, _ = episode(mem, [("the scale reads 2 g high", None), ("The scale reads 2 g high.", None)])
    first = mem.end_session(sid, outcome_score=0.6)
    before = store_fingerprint(db_path)
    clock.advance(400 * 86_400.0)  # a pass now would archive everything
    again = mem.end_session(sid, outcome_score=0.1)
    assert again == {**first, "status": "already_ended"}
    assert store_fingerprint(db_path) == before


def test_ending_an_unknown_session_is_a_not_found_error(mem: Memory):
    with pytest.raises(NotFoundError) as info:
        mem.end_session("ses_nothere")
    assert info.value.field == "session_id"


def test_a_bad_session_id_is_a_validation_error(mem: Memory):
    with pytest.raises(ValidationError) as info:
        mem.end_session("bad id with spaces")
    assert info.value.field == "session_id"


def test_a_failure_while_closing_leaves_the_episode_open_and_unmerged(
    mem: Memory, episode: Episode, clock, db_path
):
    sid, (a, b) = episode(mem, [("the label printer jams", None), ("The label printer jams.", None)])
    clock.advance(400 * 86_400.0)
    before = store_fingerprint(db_path)
    undo = fail_closing_sessions(db_path)
    with pytest.raises(StorageError):
        mem.end_session(sid, outcome_score=0.4)
    assert store_fingerprint(db_path) == before
    undo()
    summary = mem.end_session(sid, outcome_score=0.4)
    assert summary["status"] == "ended" and summary["merged"] == 1
    assert mem.get(b)["superseded_by"] == a


def test_concurrent_end_session_calls_consolidate_exactly_once(mem: Memory, episode: Episode):
    sid, (a, b) = episode(mem, [("the forklift horn is broken", None), ("The forklift horn is broken.", None)])
    start = threading.Barrier(4)
    results: list[dict] = []
    lock = threading.Lock()

    def end() -> None:
        start.wait(timeout=30)
        summary = mem.end_session(sid, outcome_score=0.5)
        with lock:
            results.append(summary)

    threads = [threading.Thread(target=end) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(r["status"] for r in results) == ["already_ended"] * 3 + ["ended"]
    assert {r["merged"] for r in results} == {1}
    assert mem.get(a)["evidence_count"] == 2 and mem.get(b)["superseded_by"] == a
