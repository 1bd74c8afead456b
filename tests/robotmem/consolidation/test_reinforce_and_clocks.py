"""Reinforcement never leaves a fact below what learning it fresh would, and a wrong clock
(never set, set back, or a year ahead for an episode) does not damage confidence for good
(docs/consolidation.md, "Reinforcement" and "Clocks"). Both run on SQLite and PostgreSQL."""

from __future__ import annotations

import logging

import pytest
from conftest import DAY, Episode

from robotmem import Memory
from robotmem.consolidation.decay import CLOCK_QUORUM
from robotmem.store.decay import FUTURE_TOLERANCE_S, PLAUSIBLE_SINCE, reinforced_confidence

CTX = {"robot": {"id": "arm-1"}, "task": {"name": "pick"}}
YEAR = 365 * DAY
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


def test_a_fact_learned_under_a_1970_clock_survives_the_sync(db_path, clock) -> None:
    clock.now = 120.0
    with Memory(db_path, clock=clock, embedder=None) as mem:
        sid = mem.start_session()["session_id"]
        fact = mem.learn("the left gripper pad is worn", CTX, session_id=sid)["memory_id"]
        clock.advance(200 * DAY)  # still 1970: an unset clock archives nothing
        assert mem.end_session(sid)["archived"] == 0
        clock.now = 1_800_000_000.0  # NTP sync
        assert fact in recalled(mem, "left gripper pad worn")  # an unset clock's stamp has no age
        sid = mem.start_session()["session_id"]
        mem.save_perception("camera frame of the table", session_id=sid)
        assert mem.end_session(sid)["archived"] == 0
        record = mem.get(fact)
        assert record["status"] == "active" and record["reinforced_at"] == clock.now
        assert record["confidence"] == pytest.approx(0.8)
        clock.advance(30 * DAY)  # and it decays from the sync on
        assert mem.get(fact)["confidence"] == pytest.approx(0.4)


def test_an_unset_clock_neither_restores_nor_archives(mem: Memory, clock) -> None:
    gone = mem.learn("the old charger was in bay 1", CTX)["memory_id"]
    clock.advance(200 * DAY)  # 0.8 * 2^(-200/30) < archive_floor
    kept = mem.learn("the charger is in bay 3", CTX)["memory_id"]
    sid = mem.start_session()["session_id"]
    assert mem.end_session(sid)["archived"] == 1
    real = clock.now
    clock.now = BOOT_1970  # every stamp is ahead of this clock: nothing looks aged to it
    sid = mem.start_session()["session_id"]
    assert mem.end_session(sid)["archived"] == 0
    assert mem.get(gone)["status"] == "archived" and mem.get(kept)["status"] == "active"
    assert mem.get(kept)["reinforced_at"] == real


def test_a_year_ahead_for_one_episode_does_no_lasting_damage(mem: Memory, clock, caplog) -> None:
    fact = establish(mem, "the conveyor stops at noon for cleaning")
    clock.advance(YEAR)  # NTP a year ahead
    sid = mem.start_session()["session_id"]
    assert mem.learn("the conveyor stops at noon for cleaning", CTX, session_id=sid)["status"] == "duplicate"
    dock = mem.learn("the charging dock moved to bay 3", CTX, session_id=sid)["memory_id"]
    mem.end_session(sid)
    # Decayed by a year (to ~0) but confirmed: worth a fresh fact plus the step, not 0.1.
    assert mem.get(fact)["confidence"] == pytest.approx(0.9)
    clock.advance(-YEAR)  # corrected
    sid = mem.start_session()["session_id"]
    mem.save_perception("camera frame of the table", session_id=sid)
    with caplog.at_level(logging.WARNING, logger="robotmem"):
        assert mem.end_session(sid)["archived"] == 0
    assert any("2 memories" in r.getMessage() and "wrong clock" in r.getMessage() for r in caplog.records)
    for memory_id, confidence in ((fact, 0.9), (dock, 0.8)):
        record = mem.get(memory_id)
        assert record["reinforced_at"] == clock.now and record["confidence"] == pytest.approx(confidence)
    clock.advance(30 * DAY)  # both decay from the correction on, not a year later
    assert mem.get(dock)["confidence"] == pytest.approx(0.4)
    assert mem.get(fact)["confidence"] == pytest.approx(0.45)


def test_a_clock_set_back_behind_most_of_the_collection_restamps_and_archives_nothing(mem: Memory, clock) -> None:
    ids = [mem.learn(f"shelf {i} holds the spare grippers", CTX)["memory_id"] for i in range(CLOCK_QUORUM)]
    stamps = {i: mem.get(i)["reinforced_at"] for i in ids}
    clock.advance(-2 * YEAR)  # reset to a firmware date after 2020 but behind the store
    assert clock.now >= PLAUSIBLE_SINCE and clock.now + FUTURE_TOLERANCE_S < min(stamps.values())
    sid = mem.start_session()["session_id"]
    mem.save_perception("camera frame of the table", session_id=sid)
    assert mem.end_session(sid)["archived"] == 0
    assert {i: mem.get(i)["reinforced_at"] for i in ids} == stamps


def test_an_unset_or_set_back_clock_is_warned_about_once_with_the_numbers(mem: Memory, clock, caplog) -> None:
    mem.learn("the left gripper pad is worn", CTX)
    real = clock.now
    with caplog.at_level(logging.WARNING, logger="robotmem"):
        clock.now = BOOT_1970
        mem.learn("the right gripper pad is worn", CTX)
        mem.recall("gripper pad")
        clock.now = real  # set
        mem.recall("gripper pad")
        clock.now = real - 10 * DAY  # set back ten days
        mem.recall("gripper pad")
        mem.recall("gripper pad")
    messages = [r.getMessage() for r in caplog.records if "the clock reads" in r.getMessage()]
    assert len(messages) == 2
    assert "95.000" in messages[0] and "never set" in messages[0]
    assert f"{real - 10 * DAY:.3f}" in messages[1] and "10.0 days behind" in messages[1]
    assert f"{real:.3f}" in messages[1]


def test_a_process_started_at_a_firmware_date_continues_the_stores_time_until_ntp(db_path, clock, caplog) -> None:
    """A board without an RTC battery boots at its firmware date (2024-01-01, years behind the
    store) and learns before NTP syncs. Stamped as read, those facts looked 2.4 years old at the
    sync and the next end_session archived them; the episode lasted 2.4 years and listed last."""
    with Memory(db_path, clock=clock, embedder=None) as mem:
        for i in range(CLOCK_QUORUM + 2):
            mem.learn(f"shelf {i} holds the spare grippers", CTX)
        newest = clock.now
    firmware = 1_704_067_200.0
    clock.now = firmware
    with caplog.at_level(logging.WARNING, logger="robotmem"), Memory(db_path, clock=clock, embedder=None) as mem:
        sid = mem.start_session(context=CTX)["session_id"]
        fact = mem.learn("the tray must be loaded slowly", CTX, session_id=sid)["memory_id"]
        assert mem.get(fact)["reinforced_at"] == newest
        clock.advance(600)
        mem.end_session(sid)
        clock.now = newest + 3 * 3600  # NTP sync: the robot was off for 2 hours, worked for one
        sid = mem.start_session(context=CTX)["session_id"]
        clock.advance(60)
        summary = mem.end_session(sid)
        assert summary["archived"] == 0 and summary["duration_s"] == pytest.approx(60)
        record = mem.get(fact)
        assert record["status"] == "active"
        # It looks as old as the time since the store's newest stamp, never years.
        assert record["confidence"] == pytest.approx(0.8 * 2 ** (-(3 * 3600 + 60) / (30 * DAY)))
        assert fact in recalled(mem, "tray loaded slowly")
        assert [s["session_id"] for s in mem.list_sessions(limit=1)] == [sid]
    assert any("continue from the store's newest" in r.getMessage() for r in caplog.records)


def test_a_process_started_behind_a_few_stamps_uses_its_clock_as_read(db_path, clock) -> None:
    """Not a set-back clock but stamps ahead (a year-ahead episode, then corrected): the process
    reads its clock as it is, and end_session brings those stamps to it."""
    with Memory(db_path, clock=clock, embedder=None) as mem:
        for i in range(CLOCK_QUORUM + 2):
            mem.learn(f"shelf {i} holds the spare grippers", CTX)
        clock.advance(YEAR)
        for i in range(CLOCK_QUORUM):
            mem.learn(f"bay {i} holds the charger", CTX)
    clock.advance(-YEAR + 60)
    with Memory(db_path, clock=clock, embedder=None) as mem:
        fact = mem.learn("the lift door closes after 8 seconds", CTX)["memory_id"]
        assert mem.get(fact)["reinforced_at"] == clock.now


def test_a_process_started_under_a_1970_clock_continues_the_stores_time(db_path, clock) -> None:
    """An RTC lost at boot, with a store that holds a history: the episode starts and its facts
    are stamped at the store's time, not 1970 (an episode of 56 years, listed last, outside every
    time window)."""
    with Memory(db_path, clock=clock, embedder=None) as mem:
        mem.learn("shelf 1 holds the spare grippers", CTX)
        newest = clock.now
    clock.now = BOOT_1970
    with Memory(db_path, clock=clock, embedder=None) as mem:
        sid = mem.start_session(context=CTX)["session_id"]
        assert mem.get_session(sid)["started_at"] == newest
        fact = mem.learn("the tray must be loaded slowly", CTX, session_id=sid)["memory_id"]
        clock.advance(600)
        assert mem.get(fact)["occurred_at"] == newest
        assert mem.end_session(sid)["duration_s"] == pytest.approx(600)
        assert fact in {h["id"] for h in mem.recall("", since=newest - 1)["results"]}


def _daily_history(mem: Memory, clock, days: int, facts: int = 1) -> dict[int, float]:
    """One episode a day with ``facts`` facts: memory id -> the time it was learned."""
    learned = {}
    for day in range(days):
        sid = mem.start_session(context=CTX)["session_id"]
        for k in range(facts):
            text = f"day {day}: pallet {day}.{k} went to aisle {day % 17}"
            learned[mem.learn(text, CTX, session_id=sid)["memory_id"]] = clock.now
        clock.advance(600)
        mem.end_session(sid)
        clock.advance(DAY - 600)
    return learned


def test_a_firmware_date_inside_a_long_history_archives_none_of_it(db_path, clock) -> None:
    """A robot in service 400 days is re-flashed with an image built 150 days ago and loses its
    RTC: the store's last 150 days are ahead of the clock, but not most of it. Taken for stamps
    a clock ahead wrote, they were moved back 150 days and archived at the sync: every fact of
    the last 120 days (0.8 * 2^-5 is below the floor)."""
    with Memory(db_path, clock=clock, embedder=None) as mem:
        learned = _daily_history(mem, clock, 400)
    real = clock.now
    clock.now = real - 150 * DAY
    with Memory(db_path, clock=clock, embedder=None) as mem:
        sid = mem.start_session(context=CTX)["session_id"]
        clock.advance(600)
        mem.end_session(sid)
        clock.now = real + 1200  # NTP sync
        sid = mem.start_session(context=CTX)["session_id"]
        clock.advance(60)
        mem.end_session(sid)
        for memory_id, at in learned.items():
            expected = 0.8 * 2 ** (-(clock.now - at) / (30 * DAY))
            record = mem.get(memory_id)
            assert record["status"] == ("active" if expected >= 0.05 else "archived"), (memory_id, expected)
            assert record["confidence"] == pytest.approx(expected, abs=1e-6)


def test_a_fleet_robot_days_behind_moves_no_other_robots_stamps_back(db_path, clock) -> None:
    """Robot B's clock runs 5 days behind the fleet's. Its end_session moved every memory the
    others stamped in those 5 days back to its clock, so they looked 5 days older than they were."""
    with Memory(db_path, clock=clock, embedder=None) as fleet:
        learned = _daily_history(fleet, clock, 30, facts=4)
        with Memory(db_path, clock=lambda: clock.now - 5 * DAY, embedder=None) as robot_b:
            sid = robot_b.start_session(context=CTX)["session_id"]
            robot_b.learn("the lift is slow today", CTX, session_id=sid)
            robot_b.end_session(sid)
        for memory_id, at in learned.items():
            assert fleet.get(memory_id)["reinforced_at"] == at


def test_ntp_stepping_the_clock_back_minutes_keeps_records_in_the_order_written(mem: Memory, clock) -> None:
    """NTP steps the clock back 5 minutes mid-episode: what was written after the step sorted
    before what was written just before it, and fell out of a window opened before it."""
    sid = mem.start_session(context=CTX)["session_id"]
    opened = clock.now
    before = mem.learn("door A is open", CTX, session_id=sid)["memory_id"]
    clock.advance(60 - 300)
    after = mem.learn("door B is open", CTX, session_id=sid)["memory_id"]
    assert mem.get(after)["occurred_at"] >= mem.get(before)["occurred_at"]
    assert [m["id"] for m in mem.session_timeline(sid)["memories"]] == [before, after]
    assert {h["id"] for h in mem.recall("", since=opened)["results"]} == {before, after}
    clock.advance(120)
    assert mem.end_session(sid)["duration_s"] == 0.0  # the 5 minutes are not made up: the time waits
    nxt = mem.start_session(context=CTX)["session_id"]
    assert mem.get_session(nxt)["started_at"] >= mem.get_session(sid)["started_at"]
    clock.advance(600)  # past the step: the clock is used as read again
    assert mem.get_session(mem.start_session()["session_id"])["started_at"] == clock.now


def test_a_robot_booting_at_its_firmware_date_every_day_starts_each_episode_after_the_last(db_path, clock) -> None:
    """No network, no RTC battery: every boot reads the firmware date. Each boot continued from
    the store's newest memory, not from the last episode's end: every boot's episode started at
    the time of the last fact, the day's two hours of work lost from the store's time."""
    with Memory(db_path, clock=clock, embedder=None) as mem:
        for i in range(CLOCK_QUORUM + 2):
            mem.learn(f"shelf {i} holds the spare grippers", CTX)
    episodes = []
    for day in range(3):
        clock.now = 1_704_067_200.0  # the firmware date, at every boot
        with Memory(db_path, clock=clock, embedder=None) as mem:
            sid = mem.start_session(context=CTX)["session_id"]
            mem.learn(f"shelf {day} was restocked", CTX, session_id=sid)
            clock.advance(2 * 3600)
            mem.end_session(sid)
            episodes.append(mem.get_session(sid))
    for earlier, later in zip(episodes, episodes[1:]):
        assert later["started_at"] >= earlier["ended_at"]
        assert earlier["ended_at"] - earlier["started_at"] == pytest.approx(2 * 3600)
