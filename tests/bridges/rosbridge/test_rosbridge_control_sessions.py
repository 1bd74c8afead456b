"""A control loop opens a session through the API: the live bridge writes its episode into it."""

from __future__ import annotations

import pytest
from rosbridge_helpers import (
    bridge_sessions,
    records,
    stored_pose_x,
    wait_received,
    wait_subscribed,
    zigzag_odometry,
)

from bridges.rosbridge.testing import RosbridgeTestServer
from bridges.rosbridge.testing import messages as m
from robotmem import Memory

EPISODE = "/robotmem/episode"
LEARN = "/robotmem/learn"


def _open_control_session(memory: Memory, bridge, task: str) -> str:
    control = str(memory.start_session("robot", context={"task": {"name": task}})["session_id"])
    wait_received(bridge, EPISODE, 1)  # the bridge noticed the session and queued its attach marker
    return control


def test_records_land_in_the_control_loops_session_and_the_bridge_leaves_it_open(
        rosbridge_server: RosbridgeTestServer, start_bridge, memory: Memory) -> None:
    bridge = start_bridge(rosbridge_server, follow_interval_s=0.05)
    wait_subscribed(rosbridge_server, "/odom", LEARN)
    control = _open_control_session(memory, bridge, "fetch the cup")
    for i in range(40):  # 20 s of robot time: two chunks
        rosbridge_server.publish("/odom", zigzag_odometry(i))
    rosbridge_server.publish(LEARN, m.string("the cup was behind the kettle"))
    wait_received(bridge, "/odom", 40)
    wait_received(bridge, LEARN, 1)
    snapshot = bridge.stop()

    assert memory.get_session(control)["status"] == "open"  # the control loop ends it, not the bridge
    assert bridge_sessions(memory) == []  # no session of the bridge's own
    assert snapshot.episodes_attached == snapshot.episodes_started == snapshot.episodes_ended == 1
    chunks = memory.recall(collection="robot", session_id=control, context_filter={"source.topic": "/odom"}, n=10)
    assert chunks["count"] == 2
    for chunk in chunks["results"]:  # the control session's task travels on every record
        assert chunk["task"]["name"] == "fetch the cup"
        assert chunk["context"]["episode"]["control_session_id"] == control
    assert sorted(stored_pose_x(memory, control)) == pytest.approx([0.1 * i for i in range(40)])
    note = memory.recall("where was the cup", collection="robot", session_id=control, n=1)["results"]
    assert note and note[0]["content"] == "the cup was behind the kettle"
    (summary,) = records(memory, control, perception_type="procedural")
    assert summary["task"]["name"] == "fetch the cup"


def test_when_the_control_loop_ends_its_session_the_bridge_closes_the_episode_without_losing_the_tail(
        rosbridge_server: RosbridgeTestServer, start_bridge, memory: Memory) -> None:
    bridge = start_bridge(rosbridge_server, follow_interval_s=0.05)
    wait_subscribed(rosbridge_server, "/odom")
    control = _open_control_session(memory, bridge, "inspect the shelf")
    for i in range(40):
        rosbridge_server.publish("/odom", zigzag_odometry(i))
    wait_received(bridge, "/odom", 40)
    assert bridge.wait_until(lambda s: s.records_written >= 1, 10)  # the first 10 s chunk is in the session
    memory.end_session(control, 0.6)
    assert bridge.wait_until(lambda s: s.episodes_ended >= 1, 10)
    snapshot = bridge.stop()

    session = memory.get_session(control)
    assert session["status"] == "ended" and session["outcome_score"] == 0.6
    assert bridge_sessions(memory) == [] and snapshot.feed_errors == 0
    in_session = stored_pose_x(memory, control)
    # the first chunk (21 poses) is in the session; the tail is too when its chunk fell due (1 s
    # after the last pose) before the bridge saw the end, which a loaded machine allows
    assert len(in_session) in (21, 40)
    # robotmem refuses writes into an ended session: the rest carries the session id as its episode key
    late = memory.recall(collection="robot", context_filter={"episode.key": control,
                                                             "episode.after_session_end": True}, n=10)["results"]
    expected = ["procedural", "proprioceptive"] if len(in_session) == 21 else ["procedural"]
    assert sorted(r["perception_type"] for r in late) == expected
    late_x = [x for r in late if r["perception_type"] == "proprioceptive" for x in memory.get_data(r["id"])["x"]]
    assert sorted(in_session + late_x) == pytest.approx([0.1 * i for i in range(40)])
