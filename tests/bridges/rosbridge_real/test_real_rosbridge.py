"""The bridge against the real rosbridge server with real ROS 1 nodes publishing (see conftest.py).

Oracles are what the rospy publisher says it sent (counts, stamps; poses at 1 m/s along x),
never the bridge's own figures.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from bridges.pipeline import BridgeConfig
from bridges.pipeline.config import parse_bridge_config
from bridges.rosbridge.bridge import BridgeOptions, RosBridge
from bridges.rosbridge.testing.real_server import RealRosbridge
from robotmem import Memory
from robotmem.config import Config

ODOM_HZ = 50


def _records(memory: Memory) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for session in memory.list_sessions(collection="robot"):
        found += memory.session_timeline(session["session_id"])["memories"]
    return found


def _topic(records: list[dict[str, Any]], topic: str) -> list[dict[str, Any]]:
    return [r for r in records if r["context"].get("source", {}).get("topic") == topic]


def _summaries(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["perception_type"] == "procedural"]


class _Lines:
    """stderr of a process, read on a thread (so the pipe never fills)."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines):
                return True
            time.sleep(0.05)
        return False


@pytest.fixture
def bridge_process(real_rosbridge: RealRosbridge, robotmem_home: Path) -> Iterator[tuple[subprocess.Popen[str], _Lines]]:
    """``robotmem bridge`` (the console command's module) against the real server."""
    command = [sys.executable, "-m", "robotmem", "--json", "bridge", "--url", real_rosbridge.url,
               "--collection", "robot", "--status-interval", "1"]
    proc = subprocess.Popen(command, env=dict(os.environ, ROBOTMEM_HOME=str(robotmem_home)), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = _Lines(proc.stderr)
    try:
        assert lines.wait_for("topics from rosapi", 60), "\n".join(lines.lines)
        yield proc, lines
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_robotmem_bridge_stores_what_real_ros_nodes_publish(
        real_rosbridge: RealRosbridge, bridge_process: tuple[subprocess.Popen[str], _Lines],
        robotmem_home: Path) -> None:
    proc, lines = bridge_process
    publisher = real_rosbridge.publisher([
        {"topic": "/odom", "kind": "odom", "hz": ODOM_HZ},
        {"topic": "/amcl_pose", "kind": "pose_cov", "hz": 5},
        {"topic": "/joint_states", "kind": "joints", "hz": 100},
        {"topic": "/camera/image_raw", "kind": "image", "hz": 15},
        {"topic": "/robotmem/learn", "kind": "learn", "hz": 1},
    ], seconds=4.0, text="the ramp by dock 2 is slippery")
    publisher.wait_ready()
    sent = publisher.result()
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, "\n".join(lines.lines)
    snapshot = json.loads(out)
    # Every published odometry / joint message reached the store (the node waited for rosbridge).
    assert snapshot["fed"]["/odom"] == sent["/odom"]["count"]
    assert snapshot["fed"]["/joint_states"] == sent["/joint_states"]["count"]
    assert snapshot["dropped"] == {} and snapshot["malformed"] == {}
    with Memory(robotmem_home / "memory.db", collection="robot", embedder=None) as memory:
        records = _records(memory)
        odom = _topic(records, "/odom")
        assert sum(memory.get_data(c["id"])["raw_points"] for c in odom) == sent["/odom"]["count"]
    (summary,) = _summaries(records)
    spatial = summary["context"]["spatial"]
    assert spatial["topic"] == "/odom" and spatial["frame"] == "odom" and spatial["path_quality"] == "ok"
    assert spatial["path_length_m"] == pytest.approx((sent["/odom"]["count"] - 1) / ODOM_HZ, abs=1e-6)
    # Recorded time: the first chunk occurred at the first stamp the node sent.
    assert min(c["occurred_at"] for c in odom) == pytest.approx(sent["/odom"]["first"], abs=1e-6)
    amcl = _topic(records, "/amcl_pose")
    assert amcl and all(c["context"]["spatial"]["frame"] == "map" for c in amcl)
    (note,) = [r for r in records if r["type"] == "fact"]
    assert note["content"] == "the ramp by dock 2 is slippery"
    assert abs(note["occurred_at"] - sent["/robotmem/learn"]["first"]) < 1.0  # stamp-less: receive time
    # rosbridge sends the camera at most once a second: each frame it sent is kept.
    images = _topic(records, "/camera/image_raw")
    assert len(images) == snapshot["fed"]["/camera/image_raw"] >= 3
    # each where the robot was then (the latest pose of /odom or /amcl_pose), in that pose's frame
    assert all(i["context"]["spatial"]["frame"] in ("odom", "map") for i in images)


@pytest.fixture
def bridge_in_process(real_rosbridge: RealRosbridge, memory: Memory) -> Iterator[Any]:
    started: list[RosBridge] = []
    lines: list[str] = []

    def start(config: BridgeConfig | None = None, **options: Any) -> RosBridge:
        bridge = RosBridge(memory, config or BridgeConfig(),
                           BridgeOptions(url=real_rosbridge.url, collection="robot", status_interval_s=60.0,
                                         **options), status_sink=lines.append)
        started.append(bridge)
        bridge.start()
        assert bridge.wait_connected(30)
        return bridge

    start.lines = lines  # type: ignore[attr-defined]
    yield start
    for bridge in started:
        bridge.stop()


def test_a_server_restart_costs_at_most_its_own_length_plus_two_seconds_and_is_a_gap(
        real_rosbridge: RealRosbridge, bridge_in_process: Any, memory: Memory) -> None:
    bridge = bridge_in_process()
    assert bridge.wait_until(lambda s: "/odom" in s.subscribed, 10)
    publisher = real_rosbridge.publisher([{"topic": "/odom", "kind": "odom", "hz": ODOM_HZ}], seconds=11.0)
    publisher.wait_ready()
    time.sleep(2.0)
    down = time.monotonic()
    before = bridge.snapshot().fed.get("/odom", 0)
    real_rosbridge.kill_websocket()
    time.sleep(1.0)
    real_rosbridge.start_websocket()
    back = time.monotonic()
    assert bridge.wait_until(lambda s: s.connects >= 2, 10)
    reconnected = time.monotonic()
    sent = publisher.result()["/odom"]
    time.sleep(0.5)
    snapshot = bridge.stop()
    assert reconnected - back <= 2.5  # retries at most every 2 s (plus the retry's own time)
    assert snapshot.fed["/odom"] > before + ODOM_HZ  # data came again after the outage
    lost_s = (sent["count"] - snapshot.fed["/odom"]) / ODOM_HZ
    assert lost_s <= (back - down) + 2.0, (lost_s, back - down)
    (summary,) = _summaries(_records(memory))
    reasons = [g["reason"] for g in summary["context"]["gaps"]]
    assert any(r.startswith("disconnected from rosbridge") for r in reasons)
    spatial = summary["context"]["spatial"]
    assert spatial["path_quality"] == "gaps"
    # 1 m/s along x: every received step is 1/50 m, the one across the outage is not path.
    assert spatial["path_length_m"] == pytest.approx((snapshot.fed["/odom"] - 2) / ODOM_HZ, abs=1e-6)
    with_gap = [c for c in _topic(_records(memory), "/odom") if c["context"].get("gaps")]
    assert with_gap and all(c["context"]["spatial"]["path_quality"] == "gaps" for c in with_gap)


def test_new_topics_are_picked_up_within_a_second_and_configured_ones_at_once(
        real_rosbridge: RealRosbridge, bridge_in_process: Any) -> None:
    bridge = bridge_in_process()
    # configured topics of a known type: subscribed on connect, before anyone publishes them
    assert bridge.wait_until(lambda s: {"/odom", "/joint_states"} <= set(s.subscribed), 3)
    publisher = real_rosbridge.publisher([{"topic": "/robot2/localization", "kind": "pose_cov", "hz": 20}],
                                         seconds=4.0, wait_for_subscriber=False)
    publisher.wait_ready()
    ready = time.monotonic()
    assert bridge.wait_until(lambda s: s.received.get("/robot2/localization", 0) > 0, 10)
    first_after_s = time.monotonic() - ready
    sent = publisher.result()["/robot2/localization"]
    snapshot = bridge.stop()
    assert first_after_s < 2.0  # discovery every second, plus ROS's own connection set-up
    assert snapshot.fed["/robot2/localization"] >= sent["count"] - 2.0 * 20


def test_a_topic_the_server_refuses_is_named(real_rosbridge: RealRosbridge, bridge_in_process: Any) -> None:
    config = parse_bridge_config({"topics": [{"topic": "/blip", "converter": "json_perception"}]})
    bridge = bridge_in_process(config, silent_topic_s=2.0)
    publisher = real_rosbridge.publisher([{"topic": "/blip", "kind": "blip", "hz": 10}], seconds=5.0,
                                         wait_for_subscriber=False)
    publisher.wait_ready()
    lines = bridge_in_process.lines
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline and not any("WARNING /blip" in line for line in lines):
        time.sleep(0.1)
    publisher.kill()
    warnings = [line for line in lines if "WARNING /blip" in line]
    assert len(warnings) == 1 and "robotmem_test/Blip" in warnings[0]
    assert bridge.snapshot().received.get("/blip", 0) == 0


def test_topics_only_the_bridge_subscribes_to_are_not_named_as_silent(bridge_in_process: Any) -> None:
    # rosapi lists a topic with subscribers only: every topic the bridge subscribes to on spec
    # (/odom, /joint_states, ...) with nobody publishing it. That used to warn on every start.
    bridge = bridge_in_process(silent_topic_s=1.0)
    assert bridge.wait_until(lambda s: {"/odom", "/joint_states"} <= set(s.subscribed), 5)
    time.sleep(3.0)  # three times the limit, with discovery every second
    bridge.stop()
    assert not [line for line in bridge_in_process.lines if "WARNING" in line], bridge_in_process.lines


def test_a_simulator_reset_splits_the_episode_where_sim_time_went_back_and_loses_nothing(
        real_rosbridge: RealRosbridge, bridge_in_process: Any, memory: Memory) -> None:
    # Gazebo's "reset world": sim time (the stamps) goes back from 300 s to 0 and the robot to x = 0
    # while the bridge runs; then again 3 s later, as a training loop does. It used to be one episode
    # from 0 s to 303 s with chunks whose times ran backwards, and the camera frames after the reset
    # fell behind the sampling slot (dropped). A 3 s step back went unnoticed at first (10 s limit).
    bridge = bridge_in_process()
    assert bridge.wait_until(lambda s: {"/odom", "/joint_states"} <= set(s.subscribed), 10)
    publisher = real_rosbridge.publisher([
        {"topic": "/odom", "kind": "odom", "hz": ODOM_HZ},
        {"topic": "/joint_states", "kind": "joints", "hz": 100},
        {"topic": "/camera/image_raw", "kind": "image", "hz": 15},
    ], seconds=9.0, sim_time={"start": 300.0, "resets": [3.0, 6.0]})
    publisher.wait_ready()
    sent = publisher.result()
    time.sleep(0.5)
    snapshot = bridge.stop()
    assert snapshot.fed["/odom"] == sent["/odom"]["count"] and snapshot.clock_resets == 2
    assert "clock resets 2" in bridge.summary()
    records = _records(memory)
    sessions = memory.list_sessions(collection="robot")[::-1]  # oldest first
    assert len(sessions) == 3 and sessions[0]["context"]["episode"]["t_start_ns"] >= 300 * 10**9
    for session, odom_sent in zip(sessions, sent["/odom"]["segments"]):
        chunks = [r for r in _topic(records, "/odom") if r["session_id"] == session["session_id"]]
        assert sum(memory.get_data(c["id"])["raw_points"] for c in chunks) == odom_sent
        (summary,) = [r for r in _summaries(records) if r["session_id"] == session["session_id"]]
        spatial = summary["context"]["spatial"]
        assert spatial["path_quality"] == "ok"
        assert spatial["path_length_m"] == pytest.approx((odom_sent - 1) / ODOM_HZ, abs=1e-6)
        assert summary["context"]["task"]["duration_s"] < 3.1
    assert [s["context"].get("task", {}).get("continues") for s in sessions] == \
        [None, sessions[0]["session_id"], sessions[1]["session_id"]]
    assert len(_topic(records, "/camera/image_raw")) == snapshot.fed["/camera/image_raw"] >= 7


def test_a_server_lost_while_asking_who_publishes_does_not_name_unpublished_topics(
        real_rosbridge: RealRosbridge, bridge_in_process: Any) -> None:
    # Under repeated server restarts a discovery pass sometimes lost the connection between listing
    # the topics and asking /rosapi/publishers; the unanswered question counted as "published", and
    # /pose, /robotmem/learn, ... (subscribed by the bridge alone) were named as silent. The pass is
    # run here by hand, right after the server went, so the race is not left to chance.
    bridge = bridge_in_process(silent_topic_s=0.5)
    assert bridge.wait_until(lambda s: "/pose" in s.subscribed, 5)
    time.sleep(2.0)  # discovery listed /pose (the bridge's own subscription) and asked who publishes it
    assert "/pose" in bridge.listed
    real_rosbridge.kill_websocket()
    assert bridge.connection.wait_disconnected(10)
    bridge._warn_silent()
    real_rosbridge.start_websocket()
    assert bridge.wait_until(lambda s: s.connects >= 2, 10)
    time.sleep(2.0)
    bridge.stop()
    assert not [line for line in bridge_in_process.lines if "WARNING" in line], bridge_in_process.lines


def test_a_topic_republished_with_another_type_is_subscribed_again_with_it(
        real_rosbridge: RealRosbridge, bridge_in_process: Any) -> None:
    # /odom's publisher dies and a node publishes /odom as PoseWithCovarianceStamped: the bridge's
    # Odometry subscription received nothing of it, and nothing said so.
    bridge = bridge_in_process()
    assert bridge.wait_until(lambda s: "/odom" in s.subscribed, 10)
    first = real_rosbridge.publisher([{"topic": "/odom", "kind": "odom", "hz": ODOM_HZ}], seconds=2.0)
    first.wait_ready()
    odometry = first.result()["/odom"]["count"]
    assert bridge.wait_until(lambda s: s.fed.get("/odom", 0) == odometry, 10)
    second = real_rosbridge.publisher([{"topic": "/odom", "kind": "pose_cov", "hz": ODOM_HZ}], seconds=8.0,
                                      wait_for_subscriber=False)
    second.wait_ready()
    poses = second.result()["/odom"]["count"]
    time.sleep(0.5)
    snapshot = bridge.stop()
    # What is lost is what came before the new subscription: discovery runs every second, then ROS
    # sets the subscription up, about 1.5 s in all (238 of 250 in 4 s); on a loaded machine (a whole
    # suite beside other runs) 2 s of it were seen lost once, so 4 s is allowed of the 8 s published.
    assert snapshot.fed["/odom"] - odometry >= poses - 4.0 * ODOM_HZ
    assert bridge.pipeline.stats.topics["/odom"].msgtype == "geometry_msgs/msg/PoseWithCovarianceStamped"
    (line,) = [line for line in bridge_in_process.lines if "/odom is now" in line]
    assert "geometry_msgs/PoseWithCovarianceStamped (was nav_msgs/Odometry)" in line


def test_a_topic_republished_with_a_type_no_rule_takes_is_named(
        real_rosbridge: RealRosbridge, bridge_in_process: Any) -> None:
    bridge = bridge_in_process()
    assert bridge.wait_until(lambda s: "/odom" in s.subscribed, 10)
    publisher = real_rosbridge.publisher([{"topic": "/odom", "kind": "blip", "hz": 10}], seconds=4.0,
                                         wait_for_subscriber=False)
    publisher.wait_ready()
    publisher.result()
    bridge.stop()
    warnings = [line for line in bridge_in_process.lines if "WARNING /odom is now listed as" in line]
    assert len(warnings) == 1 and "robotmem_test/Blip, subscribed as nav_msgs/Odometry" in warnings[0]


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        return int(status.read().split("VmRSS:")[1].split()[0]) / 1024


def _peak_rss_mb_over(seconds: float) -> float:
    peak, deadline = _rss_mb(), time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.1)
        peak = max(peak, _rss_mb())
    return peak


def test_camera_frames_while_the_store_stalls_hold_at_most_the_inbox_bytes_and_each_is_stored_or_counted(
        real_rosbridge: RealRosbridge, robotmem_home: Path) -> None:
    # The inbox was bounded by count only (20,000): 2 MB frames at 5 Hz (2.8 MB of base64 each) grew the
    # bridge by 14 MB a second for as long as another writer held SQLite's lock, towards 56 GB.
    bound_mb, stall_s = 16, 10.0
    config = parse_bridge_config({"chunk_seconds": 1.0,
                                  "topics": [{"topic": "/camera/image_raw", "msgtype": "sensor_msgs/msg/Image",
                                              "converter": "image"}]})
    with Memory(robotmem_home / "stall.db", collection="robot", embedder=None,
                config=Config.load(busy_timeout_ms=120_000)) as memory:
        bridge = RosBridge(memory, config, BridgeOptions(url=real_rosbridge.url, collection="robot", recall=False,
                                                         status_interval_s=60.0, queue_max_bytes=bound_mb << 20))
        bridge.start()
        try:
            assert bridge.wait_until(lambda s: "/camera/image_raw" in s.subscribed, 30)
            publisher = real_rosbridge.publisher(
                [{"topic": "/camera/image_raw", "kind": "big_image", "hz": 5, "bytes": 2 << 20}], seconds=stall_s + 10)
            publisher.wait_ready()
            assert bridge.wait_until(lambda s: s.records_written > 0, 30)  # the store took frames before the stall
            before_mb = _rss_mb()
            lock = apsw.Connection(str(memory.path))  # another writer, as a second process would hold it
            lock.execute("BEGIN IMMEDIATE")
            try:
                peak_mb = _peak_rss_mb_over(stall_s)
                stalled = bridge.snapshot()
            finally:
                lock.execute("COMMIT")
                lock.close()
            back_ns = time.time_ns()
            sent = publisher.result()["/camera/image_raw"]["count"]
            assert bridge.wait_until(lambda s: s.queue == 0 and s.held_records == 0, 60)
        finally:
            snapshot = bridge.stop()
        frames = _topic(_records(memory), "/camera/image_raw")
    topic = "/camera/image_raw"
    # its own accounting kept to the bound, and the process's memory (from /proc) agrees
    assert peak_mb - before_mb < bound_mb + 40, (before_mb, peak_mb)
    assert stalled.dropped.get(topic, 0) > 0 and stalled.queue_peak_bytes <= bound_mb << 20
    # every frame that reached the bridge is stored or counted as dropped, and frames flow again after
    # the stall; the rosbridge server itself may lose a few of what the node published under load (its
    # own queue: 5-22 of 400 frames of 4 MB at 10 Hz were seen), never the bridge
    assert len(frames) == snapshot.fed[topic] == snapshot.received[topic]
    assert sent * 0.95 <= len(frames) + snapshot.dropped[topic] <= sent
    assert any(f["occurred_at"] > back_ns / 1e9 for f in frames)
