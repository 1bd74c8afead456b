"""An ``update`` landing between end_session's planning phase and its write phase.

The plan was made from the memories' texts and contexts as they were; the write phase
re-checks them and drops an absorption whose target or sources changed meanwhile. The
update is injected deterministically: find_related runs in phase 1 after the plan is made,
so wrapping it lets a second Memory on the same store update a memory before phase 2.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import robotmem.consolidation.episode as episode_module
from robotmem import Memory

ARM1 = {"robot": {"id": "arm-1"}, "task": {"name": "pick", "success": True}}
ARM2 = {"robot": {"id": "arm-2"}, "task": {"name": "pick", "success": True}}
TEXT = "grip force 9N held the wet glass bottle"


@pytest.fixture
def other(db_path: Path, clock: Any) -> Iterator[Memory]:
    """Another writer on the same store (an operator correcting a memory from the CLI)."""
    with Memory(db_path, clock=clock, embedder=None) as memory:
        yield memory


@pytest.fixture
def between_phases(monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[[], None]], None]:
    """``between_phases(action)``: run ``action`` after end_session planned, before it writes."""

    def arm(action: Callable[[], None]) -> None:
        original = episode_module.find_related

        def hooked(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            action()
            return result

        monkeypatch.setattr(episode_module, "find_related", hooked)

    return arm


def _earlier_fact(mem: Memory, clock: Any) -> int:
    sid = mem.start_session()["session_id"]
    old = mem.learn(TEXT, ARM1, session_id=sid)["memory_id"]
    mem.end_session(sid)
    clock.advance(3600)
    return int(old)


def test_without_an_update_the_repeat_reinforces_the_earlier_fact(mem, clock, other, between_phases):
    """The control: the same steps with a no-op between the phases do merge."""
    old = _earlier_fact(mem, clock)
    sid = mem.start_session()["session_id"]
    new = mem.learn(TEXT + ".", ARM1, session_id=sid)["memory_id"]
    between_phases(lambda: None)
    assert mem.end_session(sid)["reinforced"] == 1
    assert mem.get(new)["superseded_by"] == old


def test_an_earlier_fact_updated_between_the_phases_absorbs_nothing(mem, clock, other, between_phases):
    old = _earlier_fact(mem, clock)
    sid = mem.start_session()["session_id"]
    new = mem.learn(TEXT + ".", ARM1, session_id=sid)["memory_id"]
    between_phases(lambda: other.update(old, "grip force 15N held the wet glass bottle", context=ARM2))
    summary = mem.end_session(sid)
    assert summary["reinforced"] == 0 and summary["merged"] == 0
    updated, repeat = mem.get(old), mem.get(new)
    assert updated["content"] == "grip force 15N held the wet glass bottle" and updated["absorbed"] == []
    assert updated["evidence_count"] == 1
    assert repeat["status"] == "active" and repeat["superseded_by"] is None


@pytest.mark.parametrize("change", ["text", "context"])
def test_an_episode_fact_updated_between_the_phases_is_not_absorbed(mem, clock, other, between_phases, change):
    _earlier_fact(mem, clock)  # an earlier fact in another robot's context: not a target
    sid = mem.start_session()["session_id"]
    first = mem.learn("the wet bottle slips at 5N grip force", ARM2, session_id=sid)["memory_id"]
    clock.advance(10)
    second = mem.learn("The wet bottle slips at 5N grip force.", ARM2, session_id=sid)["memory_id"]
    new_text, new_context = (("the wet bottle slips at 3N grip force", None) if change == "text"
                             else ("The wet bottle slips at 5N grip force.", ARM1))
    between_phases(lambda: other.update(second, new_text, context=new_context))
    assert mem.end_session(sid)["merged"] == 0
    assert mem.get(second)["status"] == "active" and mem.get(first)["absorbed"] == []


def test_a_survivor_updated_between_the_phases_absorbs_nothing(mem, clock, other, between_phases):
    sid = mem.start_session()["session_id"]
    first = mem.learn("the wet bottle slips at 5N grip force", ARM2, session_id=sid)["memory_id"]
    clock.advance(10)
    second = mem.learn("The wet bottle slips at 5N grip force.", ARM2, session_id=sid)["memory_id"]
    between_phases(lambda: other.update(first, "the wet bottle holds at 8N grip force"))
    assert mem.end_session(sid)["merged"] == 0
    assert mem.get(second)["status"] == "active" and mem.get(first)["absorbed"] == []


def test_the_outcome_written_between_the_phases_does_not_stop_the_merge(mem, clock):
    """attach_outcome changes the episode's contexts inside the write phase, before the merge:
    that is not a change the plan depends on."""
    sid = mem.start_session()["session_id"]
    first = mem.learn("the wet bottle slips at 5N grip force", {**ARM2, "episode": {}}, session_id=sid)["memory_id"]
    clock.advance(10)
    second = mem.learn("The wet bottle slips at 5N grip force.", ARM2, session_id=sid)["memory_id"]
    assert mem.end_session(sid, outcome_score=0.7)["merged"] == 1
    assert mem.get(second)["superseded_by"] == first


# Two episodes of one robot and task that learned near-duplicates of the same facts, with no
# earlier episode: ended one after the other, the second merges into the first's facts. Ended
# at once (the first ending while the second is between its phases), the second planned when
# the first was still open; it must still end as if it had run second.
FLEET = {"robot": {"id": "arm-1"}, "task": {"name": "pick mug"}}
VIEWS = ["alpha", "bravo", "charlie"]


def _episode(mem: Memory, clock: Any, collection: str, view: int, context: dict[str, Any] = FLEET) -> str:
    sid = str(mem.start_session(collection=collection, context=context)["session_id"])
    for k in range(3):
        mem.learn(f"object {k} seen on the kitchen shelf near the window sill with gripper camera view {VIEWS[view]}",
                  context, session_id=sid)
        clock.advance(1)
    return sid


def _state(mem: Memory, collection: str) -> list[tuple[str, str, int, list[str], str | None]]:
    """Every fact of the collection by text: status, evidence, absorbed texts, survivor's text."""
    rows = mem.recall("object kitchen shelf", collection=collection, n=100, min_confidence=0)["results"]
    facts = {r["id"]: mem.get(r["id"]) for r in rows}
    facts |= {a: mem.get(a) for f in list(facts.values()) for a in f["absorbed"]}
    text = {i: f["content"] for i, f in facts.items()}
    return sorted((f["content"], f["status"], f["evidence_count"], sorted(text[a] for a in f["absorbed"]),
                   text.get(f["superseded_by"]) if f["superseded_by"] is not None else None)
                  for f in facts.values())


def _once(action: Callable[[], None]) -> Callable[[], None]:
    """``action`` on the first call only (the hook also fires inside the other end_session)."""
    done: list[bool] = []

    def run() -> None:
        if not done:
            done.append(True)
            action()
    return run


def test_two_episodes_ending_at_once_end_as_one_after_the_other(mem, clock, other, between_phases):
    first, second = _episode(mem, clock, "serial", 0), _episode(mem, clock, "serial", 1)
    serial = [mem.end_session(first, 0.8), mem.end_session(second, 0.8)]
    assert [(s["merged"], s["reinforced"]) for s in serial] == [(0, 0), (0, 3)]

    first, second = _episode(mem, clock, "fleet", 0), _episode(mem, clock, "fleet", 1)
    between_phases(_once(lambda: other.end_session(first, 0.8)))
    raced = mem.end_session(second, 0.8)
    assert (raced["merged"], raced["reinforced"]) == (0, 3)
    assert mem.get_session(first)["summary"]["reinforced"] == 0
    assert _state(mem, "fleet") == _state(mem, "serial")
    live = [s for s in _state(mem, "fleet") if s[1] == "active"]
    assert len(live) == 3 and sum(s[2] for s in live) == 6


def test_an_episode_started_and_ended_between_the_phases_is_merged_into(mem, clock, other, between_phases):
    """A session the plan never saw (started after it was read) is as much an earlier one."""
    def serial_order(collection: str) -> None:
        later = _episode(mem, clock, collection, 0)
        mem.end_session(_episode(mem, clock, collection, 1), 0.8)
        mem.end_session(later, 0.8)

    serial_order("serial")
    later = _episode(mem, clock, "fleet", 0)
    between_phases(_once(lambda: other.end_session(_episode(other, clock, "fleet", 1), 0.8)))
    assert mem.end_session(later, 0.8)["reinforced"] == 3
    assert _state(mem, "fleet") == _state(mem, "serial")


def test_an_episode_of_another_task_ending_between_the_phases_costs_no_second_plan(
    mem, clock, other, between_phases, monkeypatch
):
    """The plan is made again only when what ended could absorb this episode's facts."""
    first = _episode(mem, clock, "fleet", 0, {**FLEET, "task": {"name": "stack cups"}})
    second = _episode(mem, clock, "fleet", 1)
    plans: list[str] = []
    original = episode_module.plan_session

    def counted(conn: Any, session_id: str, *args: Any, **kwargs: Any) -> Any:
        plans.append(session_id)
        return original(conn, session_id, *args, **kwargs)

    monkeypatch.setattr(episode_module, "plan_session", counted)
    between_phases(_once(lambda: other.end_session(first, 0.8)))
    assert mem.end_session(second, 0.8)["reinforced"] == 0
    assert plans == [second, first]


@pytest.mark.postgresql_only  # SQLite's BEGIN IMMEDIATE already makes the writers take turns
def test_on_postgresql_the_second_writer_waits_for_the_first_to_commit(backend, db_path, mem, clock, other,
                                                                      monkeypatch):
    """PostgreSQL writers run side by side: the second end_session must not look for ended
    episodes while the first is still writing, or it sees none. The first is held inside its
    write transaction (after its lock and its look for ended episodes, before its commit) until the second is seen waiting for
    that lock, or has finished without waiting (the defect: then it merged nothing)."""
    import psycopg

    first, second = _episode(mem, clock, "fleet", 0), _episode(mem, clock, "fleet", 1)
    holding, release = threading.Event(), threading.Event()
    original = episode_module.changed_since

    def held(conn: Any, horizon: Any, collection: str, session_id: str) -> bool:
        changed = bool(original(conn, horizon, collection, session_id))
        if session_id == first:
            holding.set()
            release.wait()
        return changed

    monkeypatch.setattr(episode_module, "changed_since", held)
    results: dict[str, Any] = {}
    writer = threading.Thread(target=lambda: results.setdefault(first, other.end_session(first, 0.8)))
    writer.start()
    holding.wait()
    racer = threading.Thread(target=lambda: results.setdefault(second, mem.end_session(second, 0.8)))
    racer.start()
    with psycopg.connect(str(db_path), autocommit=True) as watch:
        while racer.is_alive() and not watch.execute(
                "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())").fetchone():
            time.sleep(0.01)
    release.set()
    writer.join()
    racer.join()
    assert (results[first]["reinforced"], results[second]["reinforced"]) == (0, 3)
    live = [s for s in _state(mem, "fleet") if s[1] == "active"]
    assert len(live) == 3 and sum(s[2] for s in live) == 6


@pytest.mark.sqlite_only  # counts SQLite's virtual-machine steps
def test_sessions_left_open_for_good_cost_end_session_nothing(mem, clock):
    """A process killed mid-episode leaves its session open for months. The look for episodes
    that ended between the phases read every memory of every session open at planning time: 100
    such sessions of 1,000 records made it 47 ms at each end_session. Only those that have ended
    since are read now, so a crashed session's records cost no steps."""
    from robotmem.consolidation.horizon import Horizon, changed_since

    crashed = mem.start_session()["session_id"]
    mem.save_perceptions([{"description": f"pose sample {i}", "perception_type": "proprioceptive",
                           "session_id": crashed, "embed": False} for i in range(2000)])
    sid = mem.start_session()["session_id"]
    mem.learn(TEXT, ARM1, session_id=sid)

    def steps(open_sessions: tuple[str, ...]) -> int:
        counted = [0]

        def tick() -> bool:
            counted[0] += 1
            return False  # go on

        with mem.store.read() as conn:
            last_id = conn.execute("SELECT max(id) FROM memories").fetchone()[0]
            conn.set_progress_handler(tick, 100)
            try:
                assert not changed_since(conn, Horizon(open_sessions, last_id), mem.collection, sid)
            finally:
                conn.set_progress_handler(None)
        return counted[0]

    assert steps((crashed,)) <= steps(()) + 2
