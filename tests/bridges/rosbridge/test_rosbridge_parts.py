"""The bridge's small parts on their own: conversion, clock, discovery plan, inbox, status text."""

from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path

import pytest

from bridges.pipeline.config import BridgeConfig, TopicRule
from bridges.pipeline.messages import RosMessage
from bridges.pipeline.pipeline import Pipeline
from bridges.pipeline.sizes import approx_bytes
from bridges.pipeline.stamps import StampCheck
from bridges.rosbridge.convert import MalformedMessage, MessageClock, to_ros_message
from bridges.rosbridge.discovery import plan_subscriptions, wire_type
from bridges.rosbridge.inbox import BoundedInbox, Received
from bridges.rosbridge.sessions import ControlSessionFollower
from bridges.rosbridge.status import BridgeSnapshot, format_status, format_summary
from bridges.rosbridge.bridge import default_episode_policy
from bridges.rosbridge.writer import IngestWriter
from bridges.rosbridge.testing import messages as m
from robotmem import Memory


def received(topic: str, msgtype: str, raw: object, receive_ns: int = 5_000_000_000) -> Received:
    return Received(topic, msgtype, raw, receive_ns, time.monotonic_ns())


# ---------------------------------------------------------------- conversion


def test_image_data_arrives_as_base64_and_becomes_bytes() -> None:
    msg = to_ros_message(received("/cam", "sensor_msgs/msg/Image", m.image(2.0, 4, 2, encoding="mono8")))
    assert msg.msgtype == "sensor_msgs/msg/Image"
    assert isinstance(msg.data["data"], bytes) and len(msg.data["data"]) == 8
    assert msg.t_ns == 2_000_000_000


def test_ros1_type_names_and_secs_nsecs_stamps_are_normalised() -> None:
    raw = m.odometry(12.25, 1.0, 2.0, ros_version=1)
    msg = to_ros_message(received("/odom", "nav_msgs/Odometry", raw))
    assert msg.msgtype == "nav_msgs/msg/Odometry"
    assert msg.data["header"]["stamp"] == {"sec": 12, "nanosec": 250_000_000}
    assert msg.t_ns == 12_250_000_000


def test_message_without_stamp_takes_its_receive_time() -> None:
    assert to_ros_message(received("/robotmem/learn", "std_msgs/String", {"data": "x"}, 7)).t_ns == 7


@pytest.mark.parametrize("raw, field", [
    ([1, 2, 3], "msg"),
    ("odometry", "msg"),
    ({**m.image(1.0, 2, 2), "data": "%%% not base64"}, "data"),
    ({**m.image(1.0, 2, 2), "data": 42}, "data"),
])
def test_unusable_message_is_malformed_naming_the_field(raw: object, field: str) -> None:
    with pytest.raises(MalformedMessage, match=f"/cam: {field}"):
        to_ros_message(received("/cam", "sensor_msgs/msg/Image", raw))


def test_unparseable_type_name_is_malformed_naming_type() -> None:
    with pytest.raises(MalformedMessage, match="type"):
        to_ros_message(received("/x", "not a type", {"data": 1}))


def test_message_clock_places_unstamped_messages_on_the_stamped_clock() -> None:
    clock = MessageClock()
    sim_stamp = m.odometry(100.0, 0.0, 0.0)  # sim time 100 s, received at wall 5 s
    to_ros_message(received("/odom", "nav_msgs/msg/Odometry", sim_stamp, 5_000_000_000), clock)
    marker = to_ros_message(received("/robotmem/episode", "std_msgs/String", {"data": "start"}, 6_000_000_000),
                            clock)
    assert marker.t_ns == 101_000_000_000
    assert clock.to_message_time(7_000_000_000) == 102_000_000_000


def test_a_late_frame_keeps_its_stamp_and_arrives_on_the_clock_as_it_stood_before_it() -> None:
    clock = MessageClock()
    to_ros_message(received("/odom", "nav_msgs/msg/Odometry", m.odometry(100.0, 0.0, 0.0), 5_000_000_000), clock)
    # stamped 99.8 s (before the odometry), received 0.5 s after it: it arrived at 100.5 s
    frame = to_ros_message(received("/cam", "sensor_msgs/msg/Image", m.image(99.8, 2, 2), 5_500_000_000), clock)
    assert (frame.t_ns, frame.arrived_ns) == (99_800_000_000, 100_500_000_000)


def test_a_message_faster_than_the_usual_latency_just_after_sim_time_zero_is_placed_at_zero() -> None:
    """Sim time restarts at 0 and stamps arrive 10 ms after they are made; a note (no stamp) that
    took 2 ms arrived, on the robot's clock, at -8 ms, which no record may carry."""
    clock = MessageClock()
    wall0 = 1_800_000_000 * 10**9
    for i in range(5):
        to_ros_message(received("/odom", "nav_msgs/msg/Odometry", m.odometry(0.1 * i, 0.0, 0.0),
                                wall0 + i * 100_000_000 + 10_000_000), clock)
    fast = to_ros_message(received("/robotmem/learn", "std_msgs/msg/String", m.string("note"), wall0 + 2_000_000),
                          clock)
    assert fast.arrived_ns == fast.t_ns == 0


def test_one_bad_stamp_neither_moves_the_clock_nor_misplaces_the_messages_after_it() -> None:
    """Odometry stamped on the robot's clock (wall + 100 s), one message 20 s ahead of it: the
    pipeline places that one at its arrival (stamps.py), and the next one keeps its stamp."""
    clock = MessageClock()
    pipeline_stamps = StampCheck(BridgeConfig().max_episode_s)
    believed = []
    for i in range(10):
        stamp_s = 100.0 + i / 10 + (20.0 if i == 5 else 0.0)
        msg = to_ros_message(received("/odom", "nav_msgs/msg/Odometry", m.odometry(stamp_s, 0.0, 0.0),
                                      i * 100_000_000), clock)
        believed += pipeline_stamps.admit(msg)
        assert clock.offset_ns == -100_000_000_000
    assert [msg.t_ns for msg in believed] == [100_000_000_000 + i * 100_000_000 for i in range(10)]
    assert pipeline_stamps.replaced == 1


# ---------------------------------------------------------------- discovery


def test_plan_without_rosapi_uses_the_configured_topics_in_portable_type_form() -> None:
    report = plan_subscriptions(BridgeConfig(), None)
    planned = {s.topic: s for s in report.subscriptions}
    assert planned["/odom"].wire_type == "nav_msgs/Odometry" and not planned["/odom"].seen
    assert not report.rosapi and "rosapi unavailable" in report.describe()


def test_plan_with_rosapi_skips_a_configured_topic_of_another_type() -> None:
    report = plan_subscriptions(BridgeConfig(), {"/odom": "std_msgs/msg/String", "/imu": "sensor_msgs/msg/Imu"})
    assert "/odom" not in {s.topic for s in report.subscriptions}
    assert report.type_mismatch == {"/odom": "std_msgs/msg/String"} and report.ignored == ["/imu"]
    assert "skipped (other type): /odom is std_msgs/msg/String" in report.describe()


def test_config_rule_passes_throttle_rate_and_queue_length_to_the_subscription() -> None:
    config = BridgeConfig(topics=(TopicRule("/battery", "sensor_msgs/msg/BatteryState", "json_perception",
                                            throttle_rate_ms=2000, queue_length=3),))
    (planned,) = plan_subscriptions(config, {"/battery": "sensor_msgs/msg/BatteryState"}).subscriptions
    assert (planned.wire_type, planned.throttle_rate_ms, planned.queue_length, planned.seen) == (
        "sensor_msgs/msg/BatteryState", 2000, 3, True)


def test_wire_type_follows_the_servers_ros_version() -> None:
    assert wire_type("nav_msgs/Odometry", ros2_style=True) == "nav_msgs/msg/Odometry"
    assert wire_type("nav_msgs/msg/Odometry", ros2_style=False) == "nav_msgs/Odometry"


# ---------------------------------------------------------------- inbox


def test_inbox_refuses_and_counts_beyond_capacity_and_hands_out_in_order() -> None:
    inbox = BoundedInbox(3)
    results = [inbox.put(received("/a" if i % 2 else "/b", "std_msgs/String", {"data": i})) for i in range(5)]
    assert results == [True, True, True, False, False]
    assert inbox.dropped() == {"/a": 1, "/b": 1} and inbox.peak == 3
    assert [item.raw["data"] for item in inbox.take(10, timeout=0)] == [0, 1, 2]
    assert inbox.take(10, timeout=0) == []


def test_closed_inbox_counts_late_messages_as_dropped_but_keeps_what_it_holds() -> None:
    inbox = BoundedInbox(10)
    inbox.put(received("/a", "std_msgs/String", {"data": 1}))
    inbox.close()
    assert not inbox.put(received("/a", "std_msgs/String", {"data": 2}))
    assert len(inbox.take(10, timeout=0)) == 1 and inbox.dropped() == {"/a": 1}


def _frame(t_s: float) -> Received:
    """A 512x512 mono8 camera frame as roslibpy hands it over (parsed JSON, base64 pixels), sized."""
    raw = m.image(t_s, 512, 512, encoding="mono8")
    return Received("/cam", "sensor_msgs/Image", raw, int(t_s * 1e9), time.monotonic_ns(), approx_bytes(raw))


def test_a_messages_estimated_size_is_what_parsing_its_json_allocated() -> None:
    frame = json.dumps(m.image(1.0, 512, 512, encoding="mono8"))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        raw = json.loads(frame)
        allocated = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert approx_bytes(raw) == pytest.approx(allocated, rel=0.02)


def test_inbox_refuses_and_counts_beyond_its_bytes_until_the_writer_is_done_with_what_it_took() -> None:
    # Only a count bounded the inbox: 20,000 camera frames of 4 MiB are 112 GB.
    one = _frame(1.0).nbytes
    inbox = BoundedInbox(100, max_bytes=3 * one + one // 2)
    assert [inbox.put(_frame(t)) for t in (1.0, 2.0, 3.0, 4.0)] == [True, True, True, False]
    assert inbox.dropped() == {"/cam": 1} and inbox.held_bytes == 3 * one
    taken = inbox.take(10, timeout=0)
    assert not inbox.put(_frame(5.0))  # taken but not done: still in memory, still counted
    inbox.done(taken[0])
    assert inbox.put(_frame(6.0)) and inbox.peak_bytes == 3 * one
    # an episode marker is never refused for the bounds: losing it would merge two episodes
    assert inbox.put(received("/robotmem/episode", "std_msgs/String", {"data": "end"}), always=True)
    assert inbox.dropped() == {"/cam": 2} and inbox.accepted() == {"/cam": 4, "/robotmem/episode": 1}


def test_a_message_larger_than_the_byte_bound_is_taken_when_nothing_else_is_held() -> None:
    # Refused, every frame of a topic whose messages each exceed the bound was lost for good.
    one = _frame(1.0).nbytes
    inbox = BoundedInbox(100, max_bytes=one // 2)
    assert [inbox.put(_frame(t)) for t in (1.0, 2.0)] == [True, False]
    (taken,) = inbox.take(10, timeout=0)
    assert not inbox.put(_frame(3.0))  # the first is still being written
    inbox.done(taken)
    assert inbox.put(_frame(4.0)) and inbox.peak_bytes == one and inbox.dropped() == {"/cam": 2}


def test_a_full_inbox_still_takes_the_robots_episode_markers_and_counts_the_frames_it_refused() -> None:
    from bridges.rosbridge.bridge import BridgeOptions, RosBridge

    bridge = RosBridge(None, BridgeConfig(), BridgeOptions(queue_max_bytes=_frame(1.0).nbytes, dry_run=True))
    camera = bridge._on_message_for("/cam", "sensor_msgs/Image")
    markers = bridge._on_message_for("/robotmem/episode", "std_msgs/String")
    for t in (1.0, 2.0):
        camera(m.image(t, 512, 512, encoding="mono8"))
    markers({"data": "end"})
    snapshot = bridge.snapshot()
    assert snapshot.received == {"/cam": 1, "/robotmem/episode": 1} and snapshot.dropped == {"/cam": 1}
    assert snapshot.queue_bytes == snapshot.queue_peak_bytes > _frame(1.0).nbytes


def test_the_writer_lets_go_of_every_message_it_took() -> None:
    inbox = BoundedInbox(100, max_bytes=10**9)
    for t in (1.0, 2.0, 3.0):
        inbox.put(_frame(t))
    bad = {"data": "not base64!" * 1000}
    inbox.put(Received("/cam", "sensor_msgs/Image", bad, 4 * 10**9, time.monotonic_ns(), approx_bytes(bad)))
    writer = IngestWriter(inbox, _TickRecorder(), batch_size=2, tick_interval_s=0.05)
    writer.start()
    writer.stop(timeout=10)
    assert writer.counters.fed["/cam"] == 3 and writer.counters.malformed["/cam"] == 1  # the bad one too:
    assert inbox.held_bytes == 0


# ---------------------------------------------------------------- writer


class _TickRecorder:
    """Stands in for the pipeline: records what it is fed and the times it is told."""

    def __init__(self) -> None:
        self.fed: list[int] = []
        self.ticks: list[int] = []

    def feed(self, msg: RosMessage) -> None:
        self.fed.append(msg.t_ns)

    def tick(self, now_ns: int) -> None:
        self.ticks.append(now_ns)

    def note_gap(self, start_ns: int, end_ns: int, reason: str) -> None:
        pass

    def close(self) -> None:
        pass

    def time_reset(self, t_ns: int) -> None:
        pass


def test_a_writer_behind_its_inbox_tells_the_pipeline_only_the_time_of_what_it_has_fed() -> None:
    # Messages received an hour ago still wait: telling the pipeline "now" would close an ended
    # episode's late_grace_s window before it sees the late frames that arrived in time.
    hour_ago = time.time_ns() - 3600 * 10**9
    inbox = BoundedInbox(10)
    arrivals = [hour_ago + i * 10**8 for i in range(3)]
    for t in arrivals:
        inbox.put(received("/odom", "nav_msgs/Odometry", {"header": {"stamp": {"sec": t // 10**9,
                                                                            "nanosec": t % 10**9}}}, t))
    pipeline = _TickRecorder()
    writer = IngestWriter(inbox, pipeline, batch_size=1, tick_interval_s=0.05)
    writer.start()
    with writer.progress:
        writer.progress.wait_for(lambda: len(pipeline.ticks) >= 3, timeout=10)
    writer.stop(timeout=10)
    assert pipeline.fed == arrivals
    assert pipeline.ticks[:2] == arrivals[:2]  # stamps = receive times here: the robot's clock is the wall's
    assert pipeline.ticks[2] > arrivals[2] + 3000 * 10**9  # the inbox is empty: now is now


# ---------------------------------------------------------------- status


def test_status_line_shows_per_topic_rates_drops_malformed_queue_and_lag() -> None:
    before = BridgeSnapshot(received={"/odom": 100, "/joint_states": 1000})
    now = BridgeSnapshot(connected=True, received={"/odom": 350, "/joint_states": 6000},
                         dropped={"/joint_states": 7}, malformed={"/odom": 2}, bad_frames=1, queue=12,
                         queue_capacity=20000, max_lag_s=0.034, records_written=9, episodes_started=1)
    line = format_status(before, now, 5.0)
    assert "bridge connected" in line
    assert "/joint_states 1000.0/s" in line and "/odom 50.0/s" in line
    assert "drops 7 malformed 3" in line and "queue 12/20000 lag 34 ms" in line
    # the inbox's bytes against their bound: which bound refused the drops
    now.queue_bytes, now.queue_max_bytes, now.write_retries, now.held_records, now.held_bytes = \
        251 << 20, 256 << 20, 3, 40, 5 << 20
    line = format_status(before, now, 5.0)
    assert "queue 12/20000 251/256 MB lag 34 ms" in line and "store retries 3 held 40 (5 MB) dropped 0" in line


def test_status_line_says_when_the_bridge_is_reconnecting() -> None:
    assert "DISCONNECTED (reconnecting)" in format_status(None, BridgeSnapshot(connected=False), 5.0)


def test_exit_summary_lists_totals_and_each_topic() -> None:
    snap = BridgeSnapshot(received={"/odom": 30}, fed={"/odom": 30}, records_written=3, episodes_started=1,
                          episodes_ended=1, connects=2, disconnects=1)
    text = format_summary(snap, 10.0)
    assert "30 messages received (3.0/s), 30 ingested, 0 dropped" in text
    assert "connects 2, disconnects 1" in text and "/odom: received 30, ingested 30" in text


# ---------------------------------------------------------------- control sessions


def test_control_session_follower_leaves_a_session_whose_control_loop_died_for_a_newer_one(
        robotmem_home: Path) -> None:
    """A control loop killed mid-session never ends it. The follower kept following it: every
    later control session went without an episode, and the bridge wrote into the dead one."""
    now = [1_780_272_000.0]
    with Memory(robotmem_home / "clocked.db", collection="robot", clock=lambda: now[0], embedder=None) as memory:
        markers: list[dict] = []
        follower = ControlSessionFollower(memory, "robot", markers.append)
        dead = memory.start_session("robot", context={"task": {"name": "inspect"}})["session_id"]
        follower.poll()
        now[0] += 86_400  # the next day, a new control loop
        sid = memory.start_session("robot", context={"task": {"name": "inspect"}})["session_id"]
        follower.poll()
        follower.poll()
        memory.end_session(sid, 0.5)
        follower.poll()
        assert [(m["event"], m["session_id"]) for m in markers] == [
            ("start", dead), ("end", dead), ("start", sid), ("end", sid)]
        assert memory.get_session(dead)["ended_at"] is None  # the bridge never ends a control session


def test_control_session_follower_emits_start_and_end_markers_and_ignores_pipeline_sessions(
        memory: Memory) -> None:
    markers: list[dict] = []
    follower = ControlSessionFollower(memory, "robot", markers.append)
    memory.start_session("robot", context={"source": {"url": "ws://other-bridge:9090"}})
    follower.poll()
    assert markers == []
    sid = memory.start_session("robot", context={"task": {"name": "inspect"}})["session_id"]
    follower.poll()
    follower.poll()  # the same open session: no second start
    memory.end_session(sid, 0.25)
    follower.poll()
    assert markers == [{"event": "start", "session_id": sid,
                        "context": {"episode": {"control_session_id": sid}, "task": {"name": "inspect"}}},
                       {"event": "end", "session_id": sid, "score": 0.25}]


def _write_all(memory: Memory, inbox: BoundedInbox) -> tuple[Pipeline, IngestWriter]:
    """Run the bridge's writer over everything in ``inbox`` into ``memory``'s collection "robot"."""
    pipeline = Pipeline(memory, BridgeConfig(), collection="robot", robot_id=None, source="ws://robot:9090",
                        episode_policy=default_episode_policy(BridgeConfig()))
    writer = IngestWriter(inbox, pipeline)
    writer.start()
    writer.stop(timeout=60)
    return pipeline, writer


def test_a_clock_stepped_back_on_the_bridges_machine_too_splits_the_episode_and_loses_nothing(
        robotmem_home: Path) -> None:
    """A robot and the bridge on one machine whose clock NTP steps back 120 s: stamps and receive
    times go back together (the clock's offset does not move). The data after the step used to go
    into the open episode, which then began 100 s before its data and lasted 120 s."""
    start = time.time_ns() - 600 * 10**9
    inbox = BoundedInbox(5000)
    arrivals = [start + i * 20_000_000 for i in range(1000)]  # 50 Hz, 20 s
    arrivals += [t - 120 * 10**9 + 20 * 10**9 for t in arrivals]  # the clock stepped back 120 s: 20 s more
    for i, t in enumerate(arrivals):
        inbox.put(received("/odom", "nav_msgs/msg/Odometry", m.odometry(t / 1e9, (i % 1000) / 50, 0.0), t))
    with Memory(robotmem_home / "memory.db", collection="robot", embedder=None) as memory:
        pipeline, writer = _write_all(memory, inbox)
        sessions = sorted(memory.list_sessions(collection="robot"),
                          key=lambda s: s["context"]["episode"]["t_start_ns"])
        starts = [s["context"]["episode"]["t_start_ns"] for s in sessions]
        assert starts == pytest.approx([arrivals[1000], arrivals[0]], abs=1000)  # the stamps' float seconds
        for session in sessions:
            chunks = [r for r in memory.session_timeline(session["session_id"])["memories"]
                      if r["context"]["source"].get("topic") == "/odom"]
            assert sum(memory.get_data(c["id"])["raw_points"] for c in chunks) == 1000
            (summary,) = [r for r in memory.session_timeline(session["session_id"])["memories"]
                          if r["perception_type"] == "procedural"]
            assert summary["context"]["task"]["duration_s"] == pytest.approx(19.98, abs=1e-6)
            assert summary["context"]["spatial"]["path_length_m"] == pytest.approx(999 / 50, abs=1e-6)
        assert pipeline.stats.topics["/odom"].outside_episode == 0
        assert writer.counters.time_resets == pipeline.stats.time_resets == 1


@pytest.mark.parametrize("late_topic", ["/joint_states", "/odom"])
def test_messages_stamped_before_a_simulator_reset_that_arrive_after_it_stay_in_their_episode(
        robotmem_home: Path, late_topic: str) -> None:
    """Sim time goes back from 303 s to 0.5 s at wall second 3. rosbridge forwards each topic on its own
    queue, so one topic's last messages stamped before the reset arrive after the other topic's
    first messages stamped after it. A message of the old clock right after the first one of the
    new used to release that first one as "one bad stamp", on the old clock: a message of the new
    episode went into the old one (the real server's test found 151 odometry messages of 150)."""
    wall0 = time.time_ns() - 600 * 10**9
    events = []  # (receive ns, topic, stamp s)
    for topic, hz in (("/odom", 50), ("/joint_states", 100)):
        for i in range(6 * hz):
            wall = i / hz
            stamp = 300.0 + wall if wall < 3.0 else wall - 2.5
            # from 60 ms before the reset on, the late topic's queue runs 80 ms behind the other's
            delay = 0.08 if topic == late_topic and wall >= 2.94 else 0.001
            events.append((wall0 + int((wall + delay) * 1e9), topic, stamp))
    inbox = BoundedInbox(5000)
    for receive_ns, topic, stamp in sorted(events):
        raw = (m.odometry(stamp, stamp % 300, 0.0) if topic == "/odom"
               else m.joint_state(stamp, ["j1"], [0.0]))
        msgtype = "nav_msgs/msg/Odometry" if topic == "/odom" else "sensor_msgs/msg/JointState"
        inbox.put(received(topic, msgtype, raw, receive_ns))
    with Memory(robotmem_home / "memory.db", collection="robot", embedder=None) as memory:
        pipeline, writer = _write_all(memory, inbox)
        sessions = sorted(memory.list_sessions(collection="robot"),
                          key=lambda s: -s["context"]["episode"]["t_start_ns"])  # the pre-reset one first
        assert len(sessions) == 2 and writer.counters.time_resets == 1
        for session in sessions:
            for topic, count, sent in (("/odom", "raw_points", 150), ("/joint_states", "raw_samples", 300)):
                chunks = [r for r in memory.session_timeline(session["session_id"])["memories"]
                          if r["context"]["source"].get("topic") == topic]
                assert sum(memory.get_data(c["id"])[count] for c in chunks) == sent, topic
        assert pipeline.stats.topics["/odom"].outside_episode == pipeline.stats.topics["/joint_states"].late == 0


def test_two_topics_stamped_by_clocks_a_minute_apart_are_not_a_clock_reset(robotmem_home: Path) -> None:
    """Odometry on the robot's clock, a camera on its own clock 60 s behind, at the same rate: the
    bridge's clock (the median of the last five offsets) swings between the two, and each swing puts
    arrival times back by a minute. Neither topic's stamps go back: no clock reset (it found 66).
    (The swinging clock still moves the idle rule's "now": docs/bridge.md, Limitations.)"""
    start = time.time_ns() - 600 * 10**9
    inbox = BoundedInbox(5000)
    for i in range(400):  # 20 s, both at 20 Hz, in bursts of three as a busy websocket delivers them
        t = start + (i // 3) * 150_000_000 + (i % 3) * 1_000_000
        topic, stamp_ns = ("/odom", t) if (i // 3) % 2 else ("/camera/image_raw", t - 60 * 10**9)
        raw = (m.odometry(stamp_ns / 1e9, i / 100, 0.0) if topic == "/odom"
               else m.image(stamp_ns / 1e9, 2, 2))
        inbox.put(received(topic, "sensor_msgs/msg/Image" if topic != "/odom" else "nav_msgs/msg/Odometry", raw, t))
    with Memory(robotmem_home / "memory.db", collection="robot", embedder=None) as memory:
        pipeline, writer = _write_all(memory, inbox)
        assert writer.counters.time_resets == pipeline.stats.time_resets == 0


def test_poses_stamped_seconds_behind_their_arrival_wait_for_the_next_message_and_are_all_stored(
        robotmem_home: Path) -> None:
    """amcl stamps a pose with the scan it used: up to seconds behind. Such a pose is more than
    CLOCK_JUMP_S off the clock, so it waits for the next odometry; it is neither a reset nor lost."""
    start = time.time_ns() - 600 * 10**9
    inbox = BoundedInbox(5000)
    for i in range(1000):  # 20 s of odometry at 50 Hz, an amcl pose 3 s old every 10th
        t = start + i * 20_000_000
        inbox.put(received("/odom", "nav_msgs/msg/Odometry", m.odometry(t / 1e9, i / 50, 0.0), t))
        if i % 10 == 0:
            inbox.put(received("/amcl_pose", "geometry_msgs/msg/PoseWithCovarianceStamped",
                               m.pose_with_covariance_stamped(t / 1e9 - 3.0, i / 50 - 3.0, 0.0), t))
    with Memory(robotmem_home / "memory.db", collection="robot", embedder=None) as memory:
        pipeline, writer = _write_all(memory, inbox)
        (session,) = memory.list_sessions(collection="robot")
        chunks = [r for r in memory.session_timeline(session["session_id"])["memories"]
                  if r["context"]["source"].get("topic") == "/amcl_pose"]
        assert sum(memory.get_data(c["id"])["raw_points"] for c in chunks) == 100
        assert writer.counters.time_resets == 0 and pipeline.stats.topics["/amcl_pose"].stamps_replaced == 0
