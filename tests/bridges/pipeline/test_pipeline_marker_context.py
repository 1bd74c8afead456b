"""The start marker's context travels on every record of its episode."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from pipeline_helpers import T0, S, joints, learn, marker, records, straight_drive

from bridges.pipeline import BridgeConfig, Pipeline, TopicEpisodes
from robotmem import Memory

MakePipeline = Callable[..., Pipeline]

START = {"task": {"name": "fetch_cup", "attempt": 2, "duration_s": 999.0},
         "robot": {"id": "not-this-one", "arm": "ur5"},
         "episode": {"operator": "ana", "key": "not-this-key"},
         "site": "lab-3"}


def _fetch_cup_episode(make_pipeline: MakePipeline) -> str:
    pipeline = make_pipeline(policy=TopicEpisodes())
    pipeline.feed(marker(T0, "start " + json.dumps(START)))
    for msg in straight_drive(T0, seconds=12):
        pipeline.feed(msg)
    for i in range(10):
        pipeline.feed(joints(T0 + i * S, [0.1 * i, 0.0]))
    pipeline.feed(learn(T0 + 5 * S, '{"insight": "The cup handle faces the wall", "context": {"task": {"name": "mine"}}}'))
    pipeline.feed(marker(T0 + 13 * S, "end 1"))
    stats = pipeline.close()
    (session,) = stats.session_ids
    return session


def test_every_record_of_the_episode_carries_the_start_markers_context(mem: Memory, make_pipeline: MakePipeline) -> None:
    session = _fetch_cup_episode(make_pipeline)
    stored = records(mem, session)
    topics = sorted(r["context"]["source"].get("topic", "(summary)") for r in stored)
    assert topics == ["(summary)", "/joint_states", "/odom", "/odom", "/robotmem/learn"]
    for record in stored:
        context = record["context"]
        assert context["site"] == "lab-3" and context["robot"]["arm"] == "ur5"
        assert context["episode"]["operator"] == "ana"
        # the record's own values win over the marker's
        assert context["robot"]["id"] == "bot-1" and context["episode"]["key"] == session


def test_record_values_win_inside_a_merged_section(mem: Memory, make_pipeline: MakePipeline) -> None:
    session = _fetch_cup_episode(make_pipeline)
    by_kind = {(r["type"], r["perception_type"]): r for r in records(mem, session)}
    chunk = by_kind[("perception", "proprioceptive")]
    assert chunk["task"]["attempt"] == 2 and chunk["task"]["duration_s"] < 20  # its own duration, not 999
    note = by_kind[("fact", None)]
    assert note["task"]["name"] == "mine" and note["task"]["attempt"] == 2  # the note's own task name


def test_recall_by_the_markers_task_name_finds_the_episodes_trajectory_chunks(
        mem: Memory, make_pipeline: MakePipeline) -> None:
    session = _fetch_cup_episode(make_pipeline)
    pipeline = make_pipeline(policy=TopicEpisodes())  # a second episode for another task
    pipeline.feed(marker(T0 + 100 * S, 'start {"task": {"name": "dock"}}'))
    for msg in straight_drive(T0 + 100 * S, seconds=5):
        pipeline.feed(msg)
    pipeline.close()

    found = mem.recall(collection="test", n=20, context_filter={"task.name": "fetch_cup", "source.topic": "/odom"})
    assert found["count"] == 2 and {r["session_id"] for r in found["results"]} == {session}
    joint = mem.recall(collection="test", context_filter={"task.name": "fetch_cup", "source.topic": "/joint_states"})
    assert joint["count"] == 1


def test_a_split_at_the_maximum_duration_keeps_the_markers_context(mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(policy=TopicEpisodes(), config=BridgeConfig(max_episode_s=20.0))
    pipeline.feed(marker(T0, 'start {"task": {"name": "patrol"}, "site": "yard"}'))
    for msg in straight_drive(T0, seconds=30, hz=5):
        pipeline.feed(msg)
    stats = pipeline.close()
    first, second = stats.session_ids
    chunks = [r for r in records(mem, second) if r["perception_type"] == "proprioceptive"]
    assert chunks and all(c["task"]["name"] == "patrol" and c["context"]["site"] == "yard" for c in chunks)
    assert all(c["task"]["continues"] == first for c in chunks)


@pytest.mark.parametrize("section", ["task", "robot", "params", "spatial"])
def test_a_start_marker_whose_section_is_not_an_object_is_malformed_and_opens_nothing(
        mem: Memory, make_pipeline: MakePipeline, section: str) -> None:
    pipeline = make_pipeline(policy=TopicEpisodes())
    pipeline.feed(marker(T0, "start " + json.dumps({section: "fetch"})))
    assert pipeline.stats.topics["/robotmem/episode"].malformed == 1
    assert mem.list_sessions() == []
