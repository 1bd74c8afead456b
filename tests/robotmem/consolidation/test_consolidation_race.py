"""An ``update`` landing between end_session's planning phase and its write phase.

The plan was made from the memories' texts and contexts as they were; the write phase
re-checks them and drops an absorption whose target or sources changed meanwhile. The
update is injected deterministically: find_related runs in phase 1 after the plan is made,
so wrapping it lets a second Memory on the same store update a memory before phase 2.
"""

from __future__ import annotations

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
