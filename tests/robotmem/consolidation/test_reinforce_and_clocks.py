"""Reinforcement never leaves a fact below what learning it fresh would, and a wrong clock
(never set, set back, or a year ahead for an episode) does not damage confidence for good
(docs/consolidation.md, "Reinforcement" and "Clocks"). Both run on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from conftest import DAY, Episode

from robotmem import Memory
from robotmem.store.decay import reinforced_confidence

CTX = {"robot": {"id": "arm-1"}, "task": {"name": "pick"}}
BOOT_1970 = 95.0  # an RTC lost at boot


def recalled(mem: Memory, query: str) -> set[int]:
    return {hit["id"] for hit in mem.recall(query)["results"]}


def establish(mem: Memory, text: str) -> int:
    """A fact learned and repeated until it is at max_confidence (0.99)."""
    memory_id = mem.learn(text, CTX)["memory_id"]
    for _ in range(3):
        mem.learn(text, CTX)
    assert mem.get(memory_id)["stored_confidence"] == pytest.approx(0.99)
    return int(memory_id)


# -- reinforcement ---------------------------------------------------------------------------

def test_the_reinforcement_rule() -> None:
    assert reinforced_confidence(0.2, 0.8, step=0.1, evidence=1, ceiling=0.99) == pytest.approx(0.9)
    assert reinforced_confidence(0.85, 0.8, step=0.1, evidence=1, ceiling=0.99) == pytest.approx(0.95)
    assert reinforced_confidence(0.95, 0.8, step=0.1, evidence=2, ceiling=0.99) == pytest.approx(0.99)


def test_an_exact_repeat_after_90_days_is_as_recallable_as_a_fresh_fact(mem: Memory, clock) -> None:
    memory_id = mem.learn("grip force 9N held the wet glass bottle", CTX)["memory_id"]
    clock.advance(90 * DAY)  # 0.8 * 2^-3 = 0.1, below the default min_confidence 0.3
    assert mem.learn("grip force 9N held the wet glass bottle", CTX)["status"] == "duplicate"
    record = mem.get(memory_id)
    assert record["confidence"] == pytest.approx(0.9) and record["reinforced_at"] == clock.now
    assert memory_id in recalled(mem, "grip force wet glass bottle")


def test_a_repeat_of_a_strong_fact_adds_the_step_to_its_decayed_confidence(mem: Memory, clock) -> None:
    memory_id = mem.learn("the lift door closes after 8 seconds", CTX)["memory_id"]
    mem.learn("the lift door closes after 8 seconds", CTX)  # 0.9
    clock.advance(DAY)
    decayed = 0.9 * 2 ** (-1 / 30)  # 0.88, above a fresh fact's 0.8
    mem.learn("the lift door closes after 8 seconds", CTX)
    assert mem.get(memory_id)["confidence"] == pytest.approx(min(0.99, decayed + 0.1))


def test_a_fact_relearned_after_90_days_stays_recallable_through_end_session(
    hybrid_mem: Memory, episode: Episode, clock
) -> None:
    sid, (old,) = episode(hybrid_mem, [("the charging dock on floor 2 is blocked by a cart", CTX)])
    hybrid_mem.end_session(sid)
    clock.advance(90 * DAY)
    sid, (new,) = episode(hybrid_mem, [("The charging dock on floor 2 is blocked by a cart.", CTX)])
    assert hybrid_mem.end_session(sid)["reinforced"] == 1
    assert hybrid_mem.get(new)["status"] == "superseded"
    record = hybrid_mem.get(old)
    assert record["confidence"] == pytest.approx(0.9) and record["evidence_count"] == 2
    assert old in recalled(hybrid_mem, "is the charging dock on floor 2 blocked")


# -- clocks ----------------------------------------------------------------------------------

def test_a_repeat_under_a_1970_clock_does_not_move_reinforced_at_back(mem: Memory, clock) -> None:
    fact = establish(mem, "the conveyor stops at noon for cleaning")
    stamped = mem.get(fact)["reinforced_at"]
    real = clock.now
    clock.now = BOOT_1970
    assert mem.learn("the conveyor stops at noon for cleaning", CTX)["status"] == "duplicate"
    record = mem.get(fact)
    assert record["reinforced_at"] == stamped and record["stored_confidence"] == pytest.approx(0.99)
    clock.now = real + 300  # NTP sync
    sid = mem.start_session()["session_id"]
    mem.save_perception("camera frame of the table", session_id=sid)
    assert mem.end_session(sid)["archived"] == 0
    assert mem.get(fact)["status"] == "active" and mem.get(fact)["confidence"] > 0.98
