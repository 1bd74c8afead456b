"""The pipeline end to end into a real store: episodes, chunks, summaries, idempotency."""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import pytest
from pipeline_helpers import (
    T0,
    S,
    by_topic,
    image,
    joints,
    learn,
    marker,
    odom,
    records,
    stored_path,
    straight_drive,
    summary_of,
    text,
)

from bridges.pipeline import (
    BridgeConfig,
    GapEpisodes,
    Pipeline,
    TopicEpisodes,
    TopicRule,
)
from bridges.pipeline.geometry import path_length
from bridges.rosbridge.bridge import default_episode_policy
from robotmem import Memory

MakePipeline = Callable[..., Pipeline]


def _only_session(mem: Memory) -> str:
    sessions = mem.list_sessions()
    assert len(sessions) == 1, sessions
    return str(sessions[0]["session_id"])


def test_a_drive_becomes_one_episode_with_ten_second_chunks_and_a_summary(mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline()
    for msg in straight_drive(T0, seconds=35, hz=20, speed=0.5):
        pipeline.feed(msg)
    stats = pipeline.close()

    session = _only_session(mem)
    assert mem.get_session(session)["status"] == "ended"
    chunks = by_topic(mem, session, "/odom")
    assert len(chunks) == 4  # 0-10, 10-20, 20-30, 30-35 s
    assert stats.topics["/odom"].messages == 700 and stats.topics["/odom"].records == 4
    first = chunks[0]
    assert first["perception_type"] == "proprioceptive"
    assert first["spatial"]["path_quality"] == "ok"
    assert first["spatial"]["start_position"] == [0.0, 0.0, 0.0]
    assert first["robot"]["id"] == "bot-1"
    assert first["context"]["source"] == {"topic": "/odom", "msgtype": "nav_msgs/msg/Odometry",
                                          "file": "/recordings/test.mcap"}
    assert "pose trajectory /odom" in first["content"] and "m from (0.00, 0.00)" in first["content"]
    summary = summary_of(mem, session)
    assert summary["spatial"]["path_length_m"] == pytest.approx(0.5 * 34.95, abs=1e-4)
    assert summary["spatial"]["end_position"][0] == pytest.approx(0.5 * 34.95)
    assert summary["task"]["duration_s"] == pytest.approx(34.95)
    assert summary["context"]["episode"]["messages"] == {"/odom": 700}


def test_stored_path_is_downsampled_but_keeps_the_raw_path_length(mem: Memory, make_pipeline: MakePipeline) -> None:
    t = np.arange(0, 60, 0.05)
    xs, ys = 4 * np.cos(t / 6), 4 * np.sin(t / 6)
    pipeline = make_pipeline()
    for i, ti in enumerate(t):
        pipeline.feed(odom(T0 + int(ti * S), float(xs[i]), float(ys[i])))
    pipeline.close()
    session = _only_session(mem)
    raw = path_length(np.column_stack([xs, ys, np.zeros_like(xs)]))
    assert summary_of(mem, session)["spatial"]["path_length_m"] == pytest.approx(raw, abs=1e-4)
    stored = stored_path(mem, session, "/odom")
    assert len(stored) < len(t) / 4  # RDP dropped most points
    assert path_length(stored) == pytest.approx(raw, rel=0.01)


def test_an_arc_chunk_is_findable_by_spatial_sort_near_a_point_it_passed(mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline()
    for msg in straight_drive(T0, seconds=40, hz=10, speed=1.0):
        pipeline.feed(msg)
    pipeline.close()
    hits = mem.recall(collection="test", n=1, spatial_sort={"field": "spatial.position", "target": [25.0, 0.0]},
                      context_filter={"source.topic": "/odom"})["results"]
    assert hits and hits[0]["spatial"]["bbox"][0][0] <= 25.0 <= hits[0]["spatial"]["bbox"][1][0]


def test_gap_episodes_split_where_the_robot_stood_still(mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(policy=GapEpisodes(20.0))
    first = straight_drive(T0, seconds=10, speed=0.5)
    parked = [odom(T0 + 10 * S + i * S, 5.0, 0.0) for i in range(40)]  # 40 s without motion
    second = straight_drive(T0 + 50 * S, seconds=10, speed=0.5, origin=(5.0, 0.0))
    for msg in first + parked + second:
        pipeline.feed(msg)
    stats = pipeline.close()
    assert stats.episodes_started == stats.episodes_ended == 2
    assert stats.topics["/odom"].outside_episode > 0  # parked messages after the idle split
    assert len(mem.list_sessions(collection="test")) == 2


def test_idle_gap_ends_a_live_episode_on_tick_without_messages(mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(policy=GapEpisodes(30.0))
    for msg in straight_drive(T0, seconds=5):
        pipeline.feed(msg)
    pipeline.tick(T0 + 20 * S)
    assert mem.list_sessions(status="open")
    pipeline.tick(T0 + 40 * S)
    assert not mem.list_sessions(status="open")
    assert pipeline.stats.episodes_ended == 1


def test_tick_writes_a_due_chunk_while_the_episode_stays_open(mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline()
    for msg in straight_drive(T0, seconds=3):
        pipeline.feed(msg)
    session = _only_session(mem)
    assert by_topic(mem, session, "/odom") == []
    pipeline.tick(T0 + 11 * S)
    assert len(by_topic(mem, session, "/odom")) == 1
    assert mem.get_session(session)["status"] == "open"


def test_max_episode_duration_splits_a_long_drive(mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(config=BridgeConfig(max_episode_s=20.0))
    for msg in straight_drive(T0, seconds=50, hz=5):
        pipeline.feed(msg)
    stats = pipeline.close()
    assert stats.episodes_started == 3
    total = sum(summary_of(mem, sid)["context"]["episode"]["messages"]["/odom"] for sid in stats.session_ids)
    assert total == 250


def test_topic_markers_delimit_episodes_with_context_and_outcome(mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(policy=TopicEpisodes())
    before = straight_drive(T0, seconds=2)
    during = straight_drive(T0 + 3 * S, seconds=5)
    for msg in [*before, marker(T0 + 3 * S, 'start {"task": {"name": "dock"}, "params": {"speed": 0.5}}'), *during]:
        pipeline.feed(msg)
    pipeline.feed(learn(T0 + 6 * S, "Dock from the left"))
    pipeline.feed(marker(T0 + 8 * S, "end 0.75"))
    stats = pipeline.close()

    assert stats.topics["/odom"].outside_episode == len(before)
    session = _only_session(mem)
    info = mem.get_session(session)
    assert info["outcome_score"] == 0.75
    assert info["context"]["task"] == {"name": "dock"} and info["context"]["params"] == {"speed": 0.5}
    summary = summary_of(mem, session)
    assert summary["task"]["name"] == "dock" and summary["task"]["outcome_score"] == 0.75
    assert summary["context"]["episode"]["messages"]["/odom"] == len(during)
    facts = [m for m in records(mem, session) if m["type"] == "fact"]
    assert [f["content"] for f in facts] == ["Dock from the left"]
    assert facts[0]["robot"]["id"] == "bot-1"


def test_a_start_marker_inside_an_episode_ends_it_and_starts_the_next(mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(policy=TopicEpisodes())
    pipeline.feed(marker(T0, "start"))
    for msg in straight_drive(T0, seconds=2):
        pipeline.feed(msg)
    pipeline.feed(marker(T0 + 3 * S, '{"event": "start", "context": {"task": {"name": "second"}}}'))
    for msg in straight_drive(T0 + 3 * S, seconds=2):
        pipeline.feed(msg)
    pipeline.feed(marker(T0 + 6 * S, '{"event": "end", "score": 1}'))
    stats = pipeline.close()
    assert stats.episodes_started == stats.episodes_ended == 2
    ended = {s["context"].get("task", {}).get("name"): s["outcome_score"] for s in mem.list_sessions()}
    assert ended == {None: None, "second": 1.0}


@pytest.mark.parametrize("bad", ["", "begin", "start [1, 2]", "start {not json", "end high", "end 1.5",
                                 '{"event": "pause"}'])
def test_a_malformed_marker_is_counted_and_changes_nothing(
    mem: Memory, make_pipeline: MakePipeline, bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    pipeline = make_pipeline(policy=TopicEpisodes())
    pipeline.feed(marker(T0, "start"))
    with caplog.at_level(logging.WARNING, logger="bridges.pipeline"):
        pipeline.feed(marker(T0 + S, bad))
    assert pipeline.stats.topics["/robotmem/episode"].malformed == 1
    assert "/robotmem/episode" in caplog.text
    assert mem.list_sessions(status="open")  # still the first episode


def test_malformed_data_messages_are_counted_never_raised(mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline()
    good = straight_drive(T0, seconds=1)
    bad_pose = odom(T0 + 2 * S, 1.0, 1.0)
    del bad_pose.data["pose"]["pose"]["position"]["y"]
    nan_pose = odom(T0 + 3 * S, float("nan"), 0.0)
    wrong_joints = joints(T0, [0.1, 0.2], names=["only_one"])
    for msg in [*good, bad_pose, nan_pose, wrong_joints, learn(T0, "   "), learn(T0, '{"insight": 3}')]:
        pipeline.feed(msg)
    stats = pipeline.close()
    assert stats.topics["/odom"].malformed == 2
    assert stats.topics["/joint_states"].malformed == 1
    assert stats.topics["/robotmem/learn"].malformed == 2
    assert summary_of(mem, _only_session(mem))["context"]["episode"]["messages"] == {"/odom": len(good)}


def test_topics_without_a_rule_are_counted_as_ignored(make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline()
    pipeline.feed(marker(T0, "start"))  # markers mean nothing to the file policy
    pipeline.feed(text(T0, "/chatter", "hello"))
    stats = pipeline.close()
    assert stats.topics["/chatter"].ignored == 1 and stats.topics["/chatter"].converter == "ignored"
    assert stats.topics["/robotmem/episode"].records == 0


def test_sample_every_s_keeps_one_message_per_interval_on_a_grid(mem: Memory, make_pipeline: MakePipeline) -> None:
    config = BridgeConfig(topics=(TopicRule("/odom", None, "pose_trajectory", sample_every_s=1.0),))
    pipeline = make_pipeline(config=config)
    for msg in straight_drive(T0, seconds=100, hz=20):
        pipeline.feed(msg)
    stats = pipeline.close()
    assert stats.topics["/odom"].messages == 2000
    # slots every second from the first message; a message up to 0.25 s before its slot takes it
    assert stats.topics["/odom"].sampled_out == 2000 - 101


def _replay_like(make_pipeline: MakePipeline, messages: list, *, close: bool = True) -> Pipeline:
    pipeline = make_pipeline(policy=TopicEpisodes(), session_id_for=lambda start: f"rpl_test_{start}")
    for msg in messages:
        pipeline.feed(msg)
    if close:
        pipeline.close()
    return pipeline


def _two_episodes() -> list:
    return [marker(T0, "start"), *straight_drive(T0, 12), learn(T0 + 5 * S, "Mind the step"), marker(T0 + 13 * S, "end 1"),
            marker(T0 + 20 * S, "start"), *straight_drive(T0 + 20 * S, 12), marker(T0 + 33 * S, "end 0.5")]


def test_deterministic_session_ids_make_a_second_run_write_nothing(mem: Memory, make_pipeline: MakePipeline) -> None:
    first = _replay_like(make_pipeline, _two_episodes())
    assert first.stats.session_ids == [f"rpl_test_{T0}", f"rpl_test_{T0 + 20 * S}"]
    before = mem.stats()
    second = _replay_like(make_pipeline, _two_episodes())
    assert mem.stats()["memories"] == before["memories"]
    assert second.stats.episodes_skipped == 2 and second.stats.records_written == 0
    assert second.stats.topics["/odom"].already_stored == 480
    assert mem.get(records(mem, f"rpl_test_{T0}")[0]["id"])["evidence_count"] == 1  # no reinforcement either


def test_an_episode_left_open_by_a_crash_is_rewritten_whole(mem: Memory, make_pipeline: MakePipeline) -> None:
    messages = _two_episodes()
    crashed = _replay_like(make_pipeline, messages[:200], close=False)  # dies inside the first episode
    crashed.flush()
    assert mem.get_session(f"rpl_test_{T0}")["status"] == "open"
    partial = len(records(mem, f"rpl_test_{T0}"))
    assert partial > 0

    rerun = _replay_like(make_pipeline, messages)
    assert rerun.stats.episodes_rewritten == 1 and rerun.stats.episodes_started == 2
    clean_counts = [len(records(mem, sid)) for sid in rerun.stats.session_ids]
    assert clean_counts[0] == 4  # two chunks + learned fact + summary, none twice
    assert mem.get_session(f"rpl_test_{T0}")["status"] == "ended"


def test_dry_run_writes_nothing_and_plans_every_record(mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(policy=TopicEpisodes(), dry_run=True, session_id_for=lambda start: f"rpl_dry_{start}")
    for msg in _two_episodes():
        pipeline.feed(msg)
    stats = pipeline.close()
    assert mem.stats()["memories"] == 0 and mem.list_sessions() == []
    actions = [step["action"] for step in pipeline.plan]
    assert actions.count("start_episode") == 2 and actions.count("end_episode") == 2
    assert actions.count("learn") == 1
    perceptions = [s for s in pipeline.plan if s["action"] == "perception"]
    assert len(perceptions) == stats.records_written == 2 * 2 + 2
    assert all(s["session_id"].startswith("rpl_dry_") for s in perceptions)


def test_a_note_before_any_data_opens_the_files_episode_and_is_not_relearned(
    mem: Memory, make_pipeline: MakePipeline
) -> None:
    messages = [learn(T0, "Battery was at 40 % at the start"), *straight_drive(T0 + S, 5)]
    for _ in range(2):
        pipeline = make_pipeline(session_id_for=lambda t: f"rpl_note_{t}")
        for msg in messages:
            pipeline.feed(msg)
        pipeline.close()
    (fact,) = [m for m in records(mem, f"rpl_note_{T0}") if m["type"] == "fact"]
    assert mem.get(fact["id"])["evidence_count"] == 1


def _live_policy() -> TopicEpisodes:
    return default_episode_policy(BridgeConfig())  # the live bridge's: markers, else automatic episodes


def test_a_note_outside_an_episode_is_stored_without_a_session_live(mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(policy=_live_policy())
    pipeline.feed(learn(T0, "the loading ramp is slippery when wet"))  # no episode open
    pipeline.feed(marker(T0 + S, "start"))
    for msg in straight_drive(T0 + S, 3):
        pipeline.feed(msg)
    pipeline.feed(marker(T0 + 4 * S, "end"))
    stats = pipeline.close()
    assert stats.episodes_started == 1
    notes = mem.recall("", collection="test", min_confidence=0, context_filter={"source.topic": "/robotmem/learn"})["results"]
    assert [(n["content"], n["session_id"]) for n in notes] == [("the loading ramp is slippery when wet", None)]


def test_with_gap_episodes_a_note_before_any_motion_opens_no_episode(mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(policy=GapEpisodes(2.0))
    pipeline.feed(learn(T0, "Battery was at 40 % at the start"))
    stats = pipeline.close()
    assert stats.episodes_started == 0 and mem.list_sessions() == []
    (note,) = mem.recall("", collection="test", min_confidence=0, context_filter={"source.topic": "/robotmem/learn"})["results"]
    assert note["session_id"] is None
