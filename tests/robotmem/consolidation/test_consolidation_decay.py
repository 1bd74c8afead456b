"""Decay: a function of the stored state and the clock only; the archive floor; protected memories."""

from __future__ import annotations

from conftest import DAY, Episode, expected_confidence

from robotmem import Memory


def test_a_hundred_end_sessions_leave_confidence_exactly_where_the_clock_says(mem: Memory, episode: Episode, clock):
    sid, (watched,) = episode(mem, [("the charger in room 3 is loose", None)])
    mem.end_session(sid)
    learned_at = mem.get(watched)["reinforced_at"]
    for i in range(100):
        clock.advance(0.1 * DAY)
        other, _ = episode(mem, [(f"checkpoint {i} reached without incident", None)], step_s=1)
        mem.end_session(other)
    record = mem.get(watched)
    # The stored confidence and its clock never move; only the read-time decay does.
    assert record["stored_confidence"] == 0.8 and record["reinforced_at"] == learned_at
    assert record["confidence"] == expected_confidence(0.8, learned_at, clock.now)
    hit = mem.recall("charger room 3 loose", n=1)["results"][0]
    assert hit["id"] == watched and hit["confidence"] == record["confidence"]


def test_repeating_end_session_work_at_the_same_clock_changes_nothing(mem: Memory, episode: Episode, clock):
    sid, ids = episode(mem, [("arm 2 needs recalibration", None), ("the gate code changed", None)])
    mem.end_session(sid)
    clock.advance(45 * DAY)
    before = [mem.get(i) for i in ids]
    for _ in range(5):
        empty = mem.start_session()["session_id"]
        mem.end_session(empty)
    after = [mem.get(i) for i in ids]
    assert [(r["confidence"], r["status"], r["stored_confidence"]) for r in after] == \
        [(r["confidence"], r["status"], r["stored_confidence"]) for r in before]


def test_memories_below_the_archive_floor_are_archived_not_deleted(mem: Memory, episode: Episode, clock):
    sid, (old,) = episode(mem, [("pallet 7 was left in aisle C", None)])
    mem.end_session(sid)
    clock.advance(121 * DAY)  # 0.8 * 2^(-121/30) = 0.049 < archive_floor 0.05
    fresh_sid, (fresh,) = episode(mem, [("aisle C was cleared this morning", None)])
    summary = mem.end_session(fresh_sid)
    assert summary["archived"] == 1
    assert mem.get(old)["status"] == "archived" and mem.get(fresh)["status"] == "active"
    found = mem.recall("pallet aisle C", n=10, min_confidence=0.01, min_relevance=0)["results"]
    assert [h["id"] for h in found] == [fresh]
    everything = mem.recall("pallet aisle C", n=10, min_confidence=0, min_relevance=0)["results"]
    assert {h["id"] for h in everything} == {old, fresh}


def test_the_archive_pass_is_idempotent(mem: Memory, episode: Episode, clock):
    sid, ids = episode(mem, [("shelf 1 is wobbly", None), ("shelf 2 is wobbly", None)])
    mem.end_session(sid)
    clock.advance(150 * DAY)
    counts = []
    for _ in range(3):
        empty = mem.start_session()["session_id"]
        counts.append(mem.end_session(empty)["archived"])
    assert counts == [2, 0, 0]
    assert {mem.get(i)["status"] for i in ids} == {"archived"}


def test_decayed_counts_active_memories_that_lost_confidence(mem: Memory, episode: Episode, clock):
    sid, _ = episode(mem, [("the blue bin is for metal", None), ("the green bin is for glass", None)])
    first = mem.end_session(sid)
    assert first["decayed"] == 0  # learned seconds ago
    clock.advance(3 * DAY)
    empty = mem.start_session()["session_id"]
    assert mem.end_session(empty)["decayed"] == 2


def test_protected_memories_never_decay_or_archive(mem: Memory, episode: Episode, clock):
    sid, (rule, note) = episode(mem, [
        ("never lift more than 5 kg with arm 1", {"category": "constraint"}),
        ("keep clear of the press during cycles", {"protected": True}),
    ])
    mem.end_session(sid)
    clock.advance(1000 * DAY)
    empty = mem.start_session()["session_id"]
    summary = mem.end_session(empty)
    assert summary["archived"] == 0 and summary["decayed"] == 0
    for mid in (rule, note):
        record = mem.get(mid)
        assert record["status"] == "active" and record["confidence"] == 0.8


def test_an_archived_memory_that_becomes_protected_is_restored(mem: Memory, episode: Episode, clock):
    sid, (mid,) = episode(mem, [("do not open hatch 4 while the line runs", None)])
    mem.end_session(sid)
    clock.advance(200 * DAY)
    mem.end_session(mem.start_session()["session_id"])
    assert mem.get(mid)["status"] == "archived"
    mem.update(mid, "do not open hatch 4 while the line runs", {"category": "safety"})
    mem.end_session(mem.start_session()["session_id"])
    assert mem.get(mid)["status"] == "active" and mem.get(mid)["confidence"] == 0.8
