"""Which data message opens an episode: never a malformed one."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pipeline_helpers import T0, S, joints, odom, records, straight_drive, summary_of

from bridges.pipeline import GapEpisodes, Pipeline, RosMessage
from robotmem import Memory

MakePipeline = Callable[..., Pipeline]


def _pose_without_y(t_ns: int) -> RosMessage:
    msg = odom(t_ns, 1.0, 1.0)
    del msg.data["pose"]["pose"]["position"]["y"]
    return msg


def _scan_with_nested_ranges(t_ns: int) -> RosMessage:
    data = {"header": {"stamp": {"sec": 0, "nanosec": 0}, "frame_id": "laser"}, "angle_min": 0.0,
            "angle_increment": 0.1, "range_min": 0.1, "range_max": 10.0, "ranges": [[1.0, 2.0], [3.0, 4.0]]}
    return RosMessage("/scan", "sensor_msgs/msg/LaserScan", t_ns, data)


MALFORMED_FIRST = {
    "pose without y": (_pose_without_y, "/odom"),
    "non-finite pose": (lambda t: odom(t, float("nan"), 0.0), "/odom"),
    "joints with too few positions": (lambda t: joints(t, [0.1], names=["a", "b"]), "/joint_states"),
    "scan with nested ranges": (_scan_with_nested_ranges, "/scan"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_FIRST))
def test_a_malformed_first_message_opens_no_episode(mem: Memory, make_pipeline: MakePipeline, case: str) -> None:
    build, topic = MALFORMED_FIRST[case]
    pipeline = make_pipeline()
    pipeline.feed(build(T0))
    stats = pipeline.close()
    assert stats.topics[topic].malformed == 1
    assert stats.episodes_started == 0 and mem.list_sessions() == []


def test_the_episode_opens_at_the_first_good_message_after_malformed_ones(
        mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline()
    pipeline.feed(_pose_without_y(T0))
    pipeline.feed(_scan_with_nested_ranges(T0 + S))
    good = straight_drive(T0 + 5 * S, seconds=2)
    for msg in good:
        pipeline.feed(msg)
    stats = pipeline.close()
    (session,) = stats.session_ids
    assert mem.get_session(session)["context"]["episode"]["t_start_ns"] == T0 + 5 * S
    assert summary_of(mem, session)["context"]["episode"]["messages"] == {"/odom": len(good)}
    assert len(records(mem, session)) == 2  # one chunk, one summary


def test_after_an_idle_gap_a_malformed_message_does_not_reopen_an_episode(
        mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(policy=GapEpisodes(5.0))
    for msg in straight_drive(T0, seconds=2):
        pipeline.feed(msg)
    pipeline.tick(T0 + 20 * S)  # idle: the episode ends
    pipeline.feed(_pose_without_y(T0 + 21 * S))
    stats = pipeline.close()
    assert stats.episodes_started == stats.episodes_ended == 1
    assert stats.topics["/odom"].malformed == 1
