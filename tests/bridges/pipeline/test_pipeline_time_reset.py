"""Pipeline.time_reset: the message clock went back (Gazebo's reset world, a robot clock stepped back).

The live bridge's writer finds the reset (tests/bridges/rosbridge, tests/bridges/rosbridge_real);
these check what the pipeline makes of it in the cases those do not reach.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from pipeline_helpers import T0, S, by_topic, marker, records, straight_drive

from bridges.pipeline import Pipeline, TopicEpisodes
from bridges.pipeline.episodes import StartEpisode
from robotmem import Memory

MakePipeline = Callable[..., Pipeline]
SIM = 300 * S  # sim time when the world is reset


def test_an_attached_episode_goes_on_in_its_control_session_after_a_reset(
        mem: Memory, make_pipeline: MakePipeline) -> None:
    control = mem.start_session("test", context={"task": {"name": "fetch"}})["session_id"]
    pipeline = make_pipeline(policy=TopicEpisodes(outside="auto"))
    pipeline.episode(StartEpisode(T0 + SIM, session_id=control, owned=False))
    for msg in straight_drive(T0 + SIM, seconds=5):
        pipeline.feed(msg)
    pipeline.time_reset(T0)
    for msg in straight_drive(T0, seconds=5):
        pipeline.feed(msg)
    stats = pipeline.close()
    assert mem.get_session(control)["status"] == "open"  # still the control loop's
    assert len(mem.list_sessions()) == 1
    summaries = [r for r in records(mem, control) if r["perception_type"] == "procedural"]
    assert sorted(s["context"]["task"]["duration_s"] for s in summaries) == [4.95, 4.95]
    assert sum(mem.get_data(c["id"])["raw_points"] for c in by_topic(mem, control, "/odom")) == 200
    assert stats.episodes_attached == 2 and stats.time_resets == 1


def test_a_reset_while_an_ended_episode_waits_for_late_messages_finishes_it_and_opens_the_next(
        mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(policy=TopicEpisodes(outside="auto"))
    pipeline.feed(marker(T0 + SIM, json.dumps({"event": "start", "context": {"task": {"name": "dock"}}})))
    for msg in straight_drive(T0 + SIM, seconds=5):
        pipeline.feed(msg)
    pipeline.feed(marker(T0 + SIM + 5 * S, "end"))  # held for late_grace_s
    pipeline.time_reset(T0)
    for msg in straight_drive(T0, seconds=5):
        pipeline.feed(msg)
    stats = pipeline.close()
    first, second = sorted(mem.list_sessions(), key=lambda s: -s["context"]["episode"]["t_start_ns"])
    assert first["status"] == "ended" and first["context"]["task"] == {"name": "dock"}
    assert sum(mem.get_data(c["id"])["raw_points"] for c in by_topic(mem, first["session_id"], "/odom")) == 100
    assert sum(mem.get_data(c["id"])["raw_points"] for c in by_topic(mem, second["session_id"], "/odom")) == 100
    topic = stats.topics["/odom"]
    assert topic.late == 0 and topic.outside_episode == 0
