"""Proactive recall: end_session's ``related`` primes the next episode with other episodes' memories."""

from __future__ import annotations

from conftest import Episode

from robotmem import Memory

PICK = {"task": {"name": "pick-mug"}, "robot": {"id": "arm-1"}}
DOCK = {"task": {"name": "dock"}, "robot": {"id": "arm-1"}}


def test_related_holds_memories_of_other_sessions_with_the_same_task_only(hybrid_mem: Memory, episode: Episode):
    earlier, earlier_ids = episode(hybrid_mem, [
        ("the mug handle is easiest to grasp from the side", None),
        ("a wet mug needs a firmer grip", None),
    ], context=PICK)
    hybrid_mem.end_session(earlier)
    other_task, _ = episode(hybrid_mem, [("the mug sits next to the dock", None)], context=DOCK)
    hybrid_mem.end_session(other_task)
    hybrid_mem.learn("mugs are stored in the left cabinet", PICK)  # not from any episode
    current, mine = episode(hybrid_mem, [
        ("grasping the mug by the handle worked", None),
        ("the mug was wet after washing", None),
    ], context=PICK)
    related = hybrid_mem.end_session(current)["related"]
    assert related, "an earlier episode of the same task exists"
    assert {hit["id"] for hit in related} <= set(earlier_ids)
    assert not {hit["id"] for hit in related} & set(mine)
    assert all(hit["session_id"] == earlier for hit in related)
    assert set(related[0]) == {"id", "content", "type", "session_id", "confidence", "score"}
    assert [h["score"] for h in related] == sorted((h["score"] for h in related), reverse=True)


def test_related_uses_the_memories_own_task_when_the_session_has_none(hybrid_mem: Memory, episode: Episode):
    earlier, (mine,) = episode(hybrid_mem, [("the tray is slippery when wet", {"task": {"name": "carry-tray"}})])
    hybrid_mem.end_session(earlier)
    elsewhere, _ = episode(hybrid_mem, [("the tray rack is slippery", {"task": {"name": "stack"}})])
    hybrid_mem.end_session(elsewhere)
    current, _ = episode(hybrid_mem, [("the tray slipped out of the gripper", {"task": {"name": "carry-tray"}})])
    assert [hit["id"] for hit in hybrid_mem.end_session(current)["related"]] == [mine]


def test_related_never_includes_the_ending_session(hybrid_mem: Memory, episode: Episode):
    current, _ = episode(hybrid_mem, [("the gripper camera is dusty", None), ("clean the gripper camera", None)],
                         context=PICK)
    assert hybrid_mem.end_session(current)["related"] == []


def test_related_works_from_text_alone_without_vectors(mem: Memory, episode: Episode):
    earlier, (hint,) = episode(mem, [("the conveyor stalls when the belt is wet", None)], context=DOCK)
    mem.end_session(earlier)
    current, _ = episode(mem, [("belt wet again, conveyor slowed", None)], context=DOCK)
    related = mem.end_session(current)["related"]
    assert [hit["id"] for hit in related] == [hint] and related[0]["session_id"] == earlier


def test_a_related_memory_reinforced_by_the_episode_shows_its_new_confidence(
    hybrid_mem: Memory, episode: Episode, clock
):
    earlier, (original,) = episode(hybrid_mem, [("the mug shelf is too high for arm-1", None)], context=PICK)
    hybrid_mem.end_session(earlier)
    clock.advance(20 * 86_400.0)
    current, _ = episode(hybrid_mem, [("The mug shelf is too high for arm-1.", None)], context=PICK)
    summary = hybrid_mem.end_session(current)
    assert summary["reinforced"] == 1
    (hit,) = [h for h in summary["related"] if h["id"] == original]
    assert hit["confidence"] == hybrid_mem.get(original)["confidence"]
