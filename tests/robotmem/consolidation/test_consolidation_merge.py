"""Consolidation inside one episode: what merges, what must stay apart, and the provenance kept."""

from __future__ import annotations

from conftest import Episode

from robotmem import Memory

PICK = {"task": {"name": "pick"}, "robot": {"id": "arm-1"}}


def grip(force: float, success: bool) -> dict:
    return {"params": {"grip_force": {"value": force, "unit": "N"}}, "task": {"name": "pick", "success": success}}


def test_grip_force_5n_9n_13n_stay_three_memories(hybrid_mem: Memory, episode: Episode):
    sid, ids = episode(hybrid_mem, [
        ("grip_force=5N succeeded", grip(5, True)),
        ("grip_force=9N failed", grip(9, False)),
        ("grip_force=13N succeeded", grip(13, True)),
    ])
    summary = hybrid_mem.end_session(sid, outcome_score=0.7)
    assert summary["merged"] == 0 and summary["reinforced"] == 0
    assert [hybrid_mem.get(i)["status"] for i in ids] == ["active"] * 3
    found = hybrid_mem.recall("grip force", n=10, context_filter={"task.name": "pick"})
    assert sorted(hit["id"] for hit in found["results"]) == sorted(ids)


def test_differing_numbers_in_text_block_a_merge_without_params(hybrid_mem: Memory, episode: Episode):
    # Cosine 0.97 with the real model: only the numbers tell these apart.
    sid, ids = episode(hybrid_mem, [("lidar sees an obstacle at 1.5 m", None), ("lidar sees an obstacle at 2.5 m", None)])
    assert hybrid_mem.end_session(sid)["merged"] == 0
    assert {hybrid_mem.get(i)["status"] for i in ids} == {"active"}


def test_negated_and_opposite_outcome_texts_are_not_merged(hybrid_mem: Memory, episode: Episode):
    sid, ids = episode(hybrid_mem, [
        ("use a slow approach for the mug", None),
        ("do not use a slow approach for the mug", None),
        ("grasp succeeded with the soft gripper", None),
        ("grasp failed with the soft gripper", None),
    ])
    assert hybrid_mem.end_session(sid)["merged"] == 0
    assert {hybrid_mem.get(i)["status"] for i in ids} == {"active"}


def test_true_near_duplicates_merge_into_the_earliest_with_provenance(hybrid_mem: Memory, episode: Episode, clock):
    sid, ids = episode(hybrid_mem, [
        ("approach the mug slowly from the left", PICK),
        ("the floor near the door is slippery", PICK),
        ("Approach the mug slowly from the left side.", PICK),
        ("approach the mug slowly from the left!", PICK),
    ], step_s=30)
    first, other, second, third = ids
    summary = hybrid_mem.end_session(sid)
    assert summary["merged"] == 2 and summary["memories"] == 4
    survivor = hybrid_mem.get(first)
    assert survivor["status"] == "active" and survivor["evidence_count"] == 3
    assert survivor["absorbed"] == [second, third]
    assert survivor["first_seen"] == hybrid_mem.get(first)["created_at"]
    assert survivor["last_seen"] == hybrid_mem.get(third)["created_at"]
    assert survivor["confidence"] == 0.99  # 0.8 + 2 x 0.1, capped at max_confidence
    for absorbed in (second, third):
        record = hybrid_mem.get(absorbed)
        assert record["status"] == "superseded" and record["superseded_by"] == first
    assert hybrid_mem.get(other)["status"] == "active"
    hits = hybrid_mem.recall("approach the mug from the left", n=10, min_confidence=0)["results"]
    assert [h["id"] for h in hits if "mug" in h["content"]] == [first]


def test_params_within_tolerance_merge_and_beyond_it_do_not(hybrid_mem: Memory, episode: Episode):
    def gentle(force: float) -> dict:
        return {"params": {"grip_force": {"value": force, "unit": "N"}}, "task": {"success": True}}

    sid, ids = episode(hybrid_mem, [
        ("grip the paper cup gently", gentle(5.0)),
        ("grip the paper cup gently.", gentle(5.1)),  # 2 % apart: the same setting
        ("Grip the paper cup gently", gentle(6.0)),  # 20 % apart: a different experience
    ])
    assert hybrid_mem.end_session(sid)["merged"] == 1
    assert hybrid_mem.get(ids[1])["superseded_by"] == ids[0]
    assert hybrid_mem.get(ids[2])["status"] == "active"


def test_different_robots_keep_their_own_memories(hybrid_mem: Memory, episode: Episode):
    sid, ids = episode(hybrid_mem, [
        ("the left wheel encoder drifts", {"robot": {"id": "tb3-1"}}),
        ("the left wheel encoder drifts.", {"robot": {"id": "tb3-2"}}),
    ])
    assert hybrid_mem.end_session(sid)["merged"] == 0
    assert {hybrid_mem.get(i)["status"] for i in ids} == {"active"}


def test_perceptions_are_never_merged(hybrid_mem: Memory):
    sid = hybrid_mem.start_session()["session_id"]
    ids = [hybrid_mem.save_perception("camera sees a red cup on the table", session_id=sid)["memory_id"]
           for _ in range(3)]
    summary = hybrid_mem.end_session(sid)
    assert summary["merged"] == 0 and summary["perceptions"] == 3
    assert {hybrid_mem.get(i)["status"] for i in ids} == {"active"}


def test_protected_memories_are_never_merged(hybrid_mem: Memory, episode: Episode):
    sid, ids = episode(hybrid_mem, [
        ("never exceed 20N on glassware", {"category": "safety"}),
        ("Never exceed 20N on glassware.", {"category": "safety"}),
        ("keep the arm below the shelf", {"protected": True}),
        ("keep the arm below the shelf.", {"protected": True}),
    ])
    assert hybrid_mem.end_session(sid)["merged"] == 0
    assert {hybrid_mem.get(i)["status"] for i in ids} == {"active"}


def test_without_vectors_the_word_rule_alone_merges(mem: Memory, episode: Episode):
    sid, ids = episode(mem, [
        ("Approach the mug slowly from the left", None),
        ("approach the mug slowly, from the left", None),
        ("approach the cup quickly from the right", None),
    ])
    assert mem.end_session(sid)["merged"] == 1
    assert mem.get(ids[1])["superseded_by"] == ids[0]
    assert mem.get(ids[2])["status"] == "active"
