"""Reinforcement across episodes: a repeated fact strengthens the earlier memory instead of duplicating it."""

from __future__ import annotations

import pytest
from conftest import DAY, Episode, expected_confidence

from robotmem import Memory

DOCK = {"task": {"name": "dock"}, "robot": {"id": "tb3-1"}}


def test_a_fact_repeated_in_a_later_episode_reinforces_the_earlier_memory(
    hybrid_mem: Memory, episode: Episode, clock
):
    first_sid, (original,) = episode(hybrid_mem, [("the charging dock on floor 2 is blocked by a cart", DOCK)])
    hybrid_mem.end_session(first_sid)
    clock.advance(10 * DAY)
    second_sid, (repeat,) = episode(hybrid_mem, [("The charging dock on floor 2 is blocked by a cart.", DOCK)])
    decayed = expected_confidence(0.8, hybrid_mem.get(original)["reinforced_at"], clock.now)
    summary = hybrid_mem.end_session(second_sid)
    assert summary["reinforced"] == 1 and summary["merged"] == 0
    record = hybrid_mem.get(original)
    assert record["evidence_count"] == 2 and record["absorbed"] == [repeat]
    assert record["reinforced_at"] == clock.now and record["last_seen"] == hybrid_mem.get(repeat)["created_at"]
    # Reinforcement starts from the better of the old fact decayed (0.63 after 10 days) and the
    # repeat's own confidence (0.8, just learned), then adds the step.
    assert decayed < 0.8
    assert record["confidence"] == pytest.approx(0.8 + 0.1, abs=1e-6)
    assert hybrid_mem.get(repeat)["status"] == "superseded" and hybrid_mem.get(repeat)["superseded_by"] == original


def test_reinforced_confidence_is_bounded_by_max_confidence(hybrid_mem: Memory, episode: Episode, clock):
    sid, (original,) = episode(hybrid_mem, [("the lift door closes after 8 seconds", DOCK)])
    hybrid_mem.end_session(sid)
    for variant in ("The lift door closes after 8 seconds.", "the lift door closes after 8 seconds!") * 3:
        sid, _ = episode(hybrid_mem, [(variant, DOCK)])
        hybrid_mem.end_session(sid)
    record = hybrid_mem.get(original)
    assert record["evidence_count"] == 7 and record["stored_confidence"] == 0.99


def test_an_episode_group_moves_into_the_earlier_memory_as_a_whole(hybrid_mem: Memory, episode: Episode):
    sid, (original,) = episode(hybrid_mem, [("the cart blocks the dock on floor 2", DOCK)])
    hybrid_mem.end_session(sid)
    sid, (a, b) = episode(hybrid_mem, [("The cart blocks the dock on floor 2.", DOCK),
                                       ("the cart blocks the dock on floor 2!", DOCK)])
    summary = hybrid_mem.end_session(sid)
    assert summary["merged"] == 1 and summary["reinforced"] == 1
    record = hybrid_mem.get(original)
    assert record["evidence_count"] == 3 and record["absorbed"] == [a, b]
    # Every absorbed memory points at the live one, never at another superseded memory.
    assert hybrid_mem.get(a)["superseded_by"] == original and hybrid_mem.get(b)["superseded_by"] == original


def test_a_repeat_with_a_different_outcome_is_a_new_memory(hybrid_mem: Memory, episode: Episode):
    ok = {"params": {"speed": 0.2}, "task": {"name": "dock", "success": True}}
    failed = {"params": {"speed": 0.2}, "task": {"name": "dock", "success": False}}
    sid, _ = episode(hybrid_mem, [("docking at slow speed", ok)])
    hybrid_mem.end_session(sid)
    sid, (second,) = episode(hybrid_mem, [("Docking at slow speed.", failed)])
    assert hybrid_mem.end_session(sid)["reinforced"] == 0
    assert hybrid_mem.get(second)["status"] == "active"


def test_an_archived_memory_repeated_in_an_episode_comes_back(hybrid_mem: Memory, episode: Episode, clock):
    sid, (original,) = episode(hybrid_mem, [("the ramp to hall B is too steep", DOCK)])
    hybrid_mem.end_session(sid)
    clock.advance(200 * DAY)  # 0.8 * 2^(-200/30) < 0.05
    sid, _ = episode(hybrid_mem, [("The ramp to hall B is too steep.", DOCK)])
    summary = hybrid_mem.end_session(sid)
    assert summary["reinforced"] == 1 and summary["archived"] == 0
    record = hybrid_mem.get(original)
    assert record["status"] == "active" and record["reinforced_at"] == clock.now


def test_facts_of_a_session_still_open_are_not_reinforcement_targets(hybrid_mem: Memory, episode: Episode):
    _, (other,) = episode(hybrid_mem, [("the hallway light flickers", DOCK)])
    sid, (mine,) = episode(hybrid_mem, [("The hallway light flickers.", DOCK)])
    assert hybrid_mem.end_session(sid)["reinforced"] == 0
    assert hybrid_mem.get(mine)["status"] == "active" and hybrid_mem.get(other)["status"] == "active"


def test_an_exact_duplicate_learned_in_a_later_episode_returns_the_existing_id(mem: Memory, episode: Episode, clock):
    sid, (original,) = episode(mem, [("door 4 sticks when cold", DOCK)])
    mem.end_session(sid, outcome_score=0.9)  # the attached outcome does not hide the duplicate
    clock.advance(DAY)
    later = mem.start_session()["session_id"]
    again = mem.learn("Door 4 sticks  when cold", DOCK, session_id=later)
    assert again == {"memory_id": original, "status": "duplicate"}
    record = mem.get(original)
    assert record["evidence_count"] == 2 and record["reinforced_at"] == clock.now


def test_two_groups_repeating_the_same_earlier_fact_both_reinforce_it(mem: Memory, episode: Episode):
    def gentle(force: float) -> dict:
        return {"params": {"grip_force": force}}

    sid, (earlier,) = episode(mem, [("grip the cup gently", gentle(5.2))])
    mem.end_session(sid)
    # 5.0 and 5.45 are 9 % apart (two groups) but each within 5 % of the earlier 5.2.
    sid, (a, b) = episode(mem, [("Grip the cup gently.", gentle(5.0)), ("grip the cup gently!", gentle(5.45))])
    summary = mem.end_session(sid)
    assert summary["reinforced"] == 1 and summary["merged"] == 0
    record = mem.get(earlier)
    assert record["evidence_count"] == 3 and record["absorbed"] == [a, b]
    assert mem.get(a)["superseded_by"] == earlier and mem.get(b)["superseded_by"] == earlier


def test_an_archived_fact_learned_again_is_active_at_once(mem: Memory, episode: Episode, clock):
    # docs/consolidation.md step 3: a duplicate learn reactivates an archived fact itself; the
    # differential oracle first read the archive pass as the only way back and disagreed.
    sid, (fact,) = episode(mem, [("the charger sits behind the lab door", DOCK)])
    mem.end_session(sid)
    clock.advance(200 * DAY)
    mem.end_session(mem.start_session()["session_id"])
    assert mem.get(fact)["status"] == "archived"
    again = mem.learn("the charger sits behind the lab door", DOCK)
    assert again["memory_id"] == fact and again["status"] == "duplicate"
    record = mem.get(fact)
    assert record["status"] == "active" and record["confidence"] == pytest.approx(0.9, abs=1e-6)
    found = mem.recall("charger lab door", min_confidence=0.3, min_relevance=0)
    assert fact in [hit["id"] for hit in found["results"]]
