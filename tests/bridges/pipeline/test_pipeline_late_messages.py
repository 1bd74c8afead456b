"""Late messages: stamped at or before an episode's end, arriving after it (late_grace_s).

Topics are independent streams through rosbridge: the camera frame stamped 0.2 s before
the `end` marker can arrive 0.3 s after it. The ended episode is finished only once
late_grace_s (2 s) of message time has passed, and takes such messages until then.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from pipeline_helpers import T0, S, by_topic, image, learn, marker, odom, records, straight_drive, summary_of

from bridges.pipeline import BridgeConfig, GapEpisodes, Pipeline, TopicEpisodes
from bridges.pipeline import pipeline as pipeline_module
from bridges.rosbridge.bridge import default_episode_policy
from robotmem import Memory

MakePipeline = Callable[..., Pipeline]

#: the end marker of the first episode in these streams
END = T0 + 5 * S


def _live_policy() -> TopicEpisodes:
    return default_episode_policy(BridgeConfig())  # the live bridge's: markers, else automatic episodes


def _first_episode(pipeline: Pipeline, start: str = "start") -> None:
    """A 5 s drive between markers; the `end` comes at END."""
    pipeline.feed(marker(T0, start))
    for msg in straight_drive(T0, 5):
        pipeline.feed(msg)
    pipeline.feed(marker(END, "end 1"))


def _sessions(mem: Memory) -> list[str]:
    """Session ids in start order."""
    sessions = sorted(mem.list_sessions(collection="test"), key=lambda s: s["context"]["episode"]["t_start_ns"])
    return [str(s["session_id"]) for s in sessions]


def _raw_points(mem: Memory, session: str, topic: str = "/odom") -> int:
    return sum(mem.get_data(c["id"])["raw_points"] for c in by_topic(mem, session, topic))


def test_a_frame_stamped_before_the_end_that_arrives_after_it_lands_in_the_episode(
        mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(policy=TopicEpisodes())
    _first_episode(pipeline)
    pipeline.feed(image(END - S // 5))
    stats = pipeline.close()
    (session,) = _sessions(mem)
    assert len(by_topic(mem, session, "/camera/image_raw")) == 1
    camera = stats.topics["/camera/image_raw"]
    assert (camera.late, camera.outside_episode, camera.records) == (1, 0, 1)
    summary = summary_of(mem, session)
    assert summary["context"]["episode"]["t_end_ns"] == END  # a late message does not move the end
    assert summary["context"]["episode"]["messages"]["/camera/image_raw"] == 1


def test_a_pose_stamped_at_the_end_that_arrives_after_it_is_in_the_last_chunk(
        mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(policy=TopicEpisodes())
    _first_episode(pipeline)
    pipeline.feed(odom(END, 2.5, 0.0))  # "at or before the end": the boundary belongs to the episode
    pipeline.close()
    (session,) = _sessions(mem)
    assert _raw_points(mem, session) == 100 + 1
    last = max(by_topic(mem, session, "/odom"), key=lambda c: c["context"]["episode"]["t_start_ns"])
    assert last["spatial"]["end_position"] == [2.5, 0.0, 0.0]


def test_a_note_stamped_before_the_end_that_arrives_after_it_is_stored_in_the_episode(
        mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(policy=_live_policy())
    _first_episode(pipeline)
    pipeline.feed(learn(END - S // 2, "the dock light blinks when charging"))
    stats = pipeline.close()
    (session,) = _sessions(mem)
    assert [m["content"] for m in records(mem, session) if m["type"] == "fact"] == ["the dock light blinks when charging"]
    assert stats.topics["/robotmem/learn"].late == 1


def test_a_message_stamped_after_the_end_opens_the_next_episode_and_a_late_one_still_goes_back(
        mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(policy=_live_policy())  # data outside markers opens an automatic episode
    _first_episode(pipeline)
    after = [odom(END + S // 2 + i * S // 10, 3.0 + 0.05 * i, 0.0) for i in range(30)]
    pipeline.feed(after[0])
    pipeline.feed(image(END - S // 5))  # arrives after data of the next episode
    for msg in after[1:]:
        pipeline.feed(msg)
    stats = pipeline.close()
    first, second = _sessions(mem)
    assert stats.episodes_started == stats.episodes_ended == 2
    assert len(by_topic(mem, first, "/camera/image_raw")) == 1 and by_topic(mem, second, "/camera/image_raw") == []
    assert mem.get_session(second)["context"]["episode"]["t_start_ns"] == END + S // 2
    assert (_raw_points(mem, first), _raw_points(mem, second)) == (100, 30)


def test_an_end_followed_at_once_by_a_start_keeps_both_episodes_apart(mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(policy=TopicEpisodes())
    _first_episode(pipeline)
    pipeline.feed(marker(END + 1, 'start {"task": {"name": "dock"}}'))
    docking = straight_drive(END + S // 20, 3, origin=(3.0, 0.0))
    for msg in docking[:10]:
        pipeline.feed(msg)
    pipeline.feed(image(END - S // 5))  # late for the first episode, arriving inside the second
    pipeline.feed(learn(END - S // 10, "the corridor was clear"))
    for msg in docking[10:]:
        pipeline.feed(msg)
    pipeline.feed(marker(END + 4 * S, "end 0.5"))
    stats = pipeline.close()
    first, second = _sessions(mem)
    assert stats.episodes_started == stats.episodes_ended == 2
    assert len(by_topic(mem, first, "/camera/image_raw")) == 1
    assert [m["content"] for m in records(mem, first) if m["type"] == "fact"] == ["the corridor was clear"]
    assert (_raw_points(mem, first), _raw_points(mem, second)) == (100, len(docking))
    assert summary_of(mem, first)["context"]["episode"]["t_end_ns"] == END
    assert summary_of(mem, second)["context"]["episode"]["t_start_ns"] == END + 1
    assert summary_of(mem, second)["task"]["name"] == "dock"
    assert (mem.get_session(first)["outcome_score"], mem.get_session(second)["outcome_score"]) == (1.0, 0.5)


def test_stopping_inside_the_grace_window_finishes_every_episode_and_loses_nothing(
        mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(policy=TopicEpisodes())
    _first_episode(pipeline)
    pipeline.feed(marker(END + S // 10, "start"))
    docking = straight_drive(END + S // 5, 1, origin=(3.0, 0.0))
    for msg in docking:
        pipeline.feed(msg)
    pipeline.feed(image(END - S // 5))
    assert [s["status"] for s in mem.list_sessions(collection="test")] == ["open"]  # the first waits, unfinished
    stats = pipeline.close()  # Ctrl-C: no message or tick passes the window
    first, second = _sessions(mem)
    assert stats.episodes_started == stats.episodes_ended == 2
    assert {mem.get_session(s)["status"] for s in (first, second)} == {"ended"}
    assert len(by_topic(mem, first, "/camera/image_raw")) == 1
    assert (_raw_points(mem, first), _raw_points(mem, second)) == (100, len(docking))


def test_a_message_past_the_window_finishes_the_episode_and_later_stragglers_stay_outside(
        mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(policy=TopicEpisodes())
    _first_episode(pipeline)
    pipeline.feed(odom(END + 2 * S, 2.5, 0.0))  # exactly late_grace_s after the end: still waiting
    (session,) = _sessions(mem)
    assert mem.get_session(session)["status"] == "open"
    pipeline.feed(odom(END + 2 * S + 1, 2.5, 0.0))  # past the window
    assert mem.get_session(session)["status"] == "ended"
    pipeline.feed(image(END - S // 5))  # too late: its episode is written
    stats = pipeline.close()
    camera = stats.topics["/camera/image_raw"]
    assert (camera.late, camera.outside_episode, stats.episodes_started) == (0, 1, 1)
    assert by_topic(mem, session, "/camera/image_raw") == []


def test_a_late_message_is_judged_by_when_it_arrived_too(mem: Memory, make_pipeline: MakePipeline) -> None:
    # The bridge (receive time) and replay (log time) know when a message arrived: one that comes
    # more than late_grace_s after the end is too late even when nothing else came in between.
    pipeline = make_pipeline(policy=TopicEpisodes())
    _first_episode(pipeline)
    pipeline.feed(replace(odom(END, 2.5, 0.0), arrived_ns=END + S))  # in time
    pipeline.feed(replace(image(END - S // 5), arrived_ns=END + 5 * S // 2))  # after the window
    stats = pipeline.close()
    (session,) = _sessions(mem)
    assert _raw_points(mem, session) == 100 + 1 and by_topic(mem, session, "/camera/image_raw") == []
    assert (stats.topics["/odom"].late, stats.topics["/camera/image_raw"].outside_episode) == (1, 1)


def test_time_passing_without_messages_finishes_the_episode(mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(policy=TopicEpisodes())
    _first_episode(pipeline)
    (session,) = _sessions(mem)
    pipeline.tick(END + S)
    assert mem.get_session(session)["status"] == "open"
    pipeline.tick(END + 3 * S)  # the live bridge's tick: the robot is quiet after `end`
    assert mem.get_session(session)["status"] == "ended"
    assert pipeline.stats.episodes_ended == 1


def test_without_a_grace_window_the_episode_is_finished_at_its_end(mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(config=BridgeConfig(late_grace_s=0.0), policy=TopicEpisodes())
    _first_episode(pipeline)
    (session,) = _sessions(mem)
    assert mem.get_session(session)["status"] == "ended"
    pipeline.feed(image(END - S // 5))
    stats = pipeline.close()
    assert stats.topics["/camera/image_raw"].outside_episode == 1


def test_an_idle_end_takes_a_late_frame_too(mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(policy=GapEpisodes(5.0))
    parked = [odom(T0 + 5 * S + i * S // 10, 2.5, 0.0) for i in range(80)]  # stands still from 5 s to 12.9 s
    for msg in straight_drive(T0, 5) + parked[:60]:
        pipeline.feed(msg)  # the idle end is found at 10 s; the parked poses up to then are in the episode
    pipeline.feed(image(T0 + 9 * S))  # a frame of the parked robot, arriving after the idle end
    for msg in parked[60:]:
        pipeline.feed(msg)
    stats = pipeline.close()
    (session,) = _sessions(mem)
    assert len(by_topic(mem, session, "/camera/image_raw")) == 1
    assert stats.topics["/camera/image_raw"].late == 1
    assert stats.topics["/odom"].outside_episode > 0  # parked poses after the end open nothing


def test_a_split_at_max_episode_s_is_not_held_the_next_part_takes_late_messages(
        mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(config=BridgeConfig(max_episode_s=10.0), policy=TopicEpisodes())
    pipeline.feed(marker(T0, "start"))
    for msg in straight_drive(T0, 12):
        pipeline.feed(msg)
    first, second = _sessions(mem)
    assert mem.get_session(first)["status"] == "ended"  # finished at the split, nothing waits
    pipeline.feed(image(T0 + 10 * S - S // 5))
    pipeline.close()
    assert len(by_topic(mem, second, "/camera/image_raw")) == 1


def test_too_many_waiting_messages_finish_the_episode_early_and_lose_none(
        mem: Memory, make_pipeline: MakePipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline_module, "_HELD_MAX", 5)  # 50,000 in the bridge
    pipeline = make_pipeline(policy=TopicEpisodes())
    _first_episode(pipeline)
    pipeline.feed(marker(END + S // 10, "start"))
    docking = straight_drive(END + S // 5, 1, origin=(3.0, 0.0))  # 20 poses inside the window
    for msg in docking[:5]:
        pipeline.feed(msg)
    first, second = _sessions(mem)  # the marker and 5 poses wait; one more would not
    assert mem.get_session(first)["status"] == "ended"
    for msg in docking[5:]:
        pipeline.feed(msg)
    pipeline.feed(image(END - S // 5))  # its episode is finished: it goes where any message goes, the open one
    stats = pipeline.close()
    assert stats.topics["/camera/image_raw"].late == 0 and len(by_topic(mem, second, "/camera/image_raw")) == 1
    assert (_raw_points(mem, first), _raw_points(mem, second)) == (100, len(docking))
