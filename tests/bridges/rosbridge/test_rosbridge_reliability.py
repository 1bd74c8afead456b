"""Reliability: server restarts and drops, bounded queues, and a shutdown that loses nothing received."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import apsw
import pytest
from rosbridge_helpers import (
    barrier,
    bridge_sessions,
    episode_summary,
    stored_pose_x,
    wait_received,
    wait_subscribed,
    zigzag_odometry,
)

from bridges.pipeline.config import BridgeConfig
from bridges.rosbridge.bridge import BridgeOptions, RosBridge
from bridges.rosbridge.recall import REQUEST_TOPIC
from bridges.rosbridge.status import format_status
from bridges.rosbridge.testing import RosbridgeTestServer
from bridges.rosbridge.testing import messages as m
from robotmem import Memory

EPISODE = "/robotmem/episode"
LEARN = "/robotmem/learn"
REPO = Path(__file__).resolve().parents[3]


def test_after_a_server_restart_the_bridge_resubscribes_and_loses_nothing_it_received(
        rosbridge_server: RosbridgeTestServer, start_bridge, memory: Memory) -> None:
    bridge = start_bridge(rosbridge_server)
    wait_subscribed(rosbridge_server, "/odom", LEARN, EPISODE)
    rosbridge_server.publish(EPISODE, m.string("start"))
    for i in range(10):
        rosbridge_server.publish("/odom", zigzag_odometry(i))
        rosbridge_server.publish(LEARN, m.string(f"note {i} written before the restart"))
    wait_received(bridge, LEARN, 10)

    rosbridge_server.restart()  # a new server process: it knows no subscriptions
    wait_subscribed(rosbridge_server, "/odom", LEARN, EPISODE)
    for i in range(10, 20):
        rosbridge_server.publish("/odom", zigzag_odometry(i))
        rosbridge_server.publish(LEARN, m.string(f"note {i} written after the restart"))
    rosbridge_server.publish(EPISODE, m.string("end 1.0"))
    wait_received(bridge, EPISODE, 2)
    snapshot = bridge.stop()

    assert snapshot.connects == 2 and snapshot.disconnects >= 1
    assert snapshot.received == snapshot.fed == {"/odom": 20, LEARN: 20, EPISODE: 2}
    (session,) = bridge_sessions(memory)
    assert sorted(stored_pose_x(memory, session["session_id"])) == pytest.approx([0.1 * i for i in range(20)])
    summary = episode_summary(memory, session["session_id"])
    assert summary["context"]["episode"]["messages"] == {"/odom": 20, LEARN: 20}
    assert memory.get_data(summary["id"])["facts_learned"] == 20


def test_a_connection_dropped_mid_stream_loses_only_what_never_arrived(
        rosbridge_server: RosbridgeTestServer, start_bridge, memory: Memory) -> None:
    bridge = start_bridge(rosbridge_server)
    wait_subscribed(rosbridge_server, "/odom", REQUEST_TOPIC)
    stream = rosbridge_server.start_stream("/odom", zigzag_odometry, rate_hz=500.0, count=600)
    assert rosbridge_server.wait_until(lambda: stream.sent >= 250, 20)
    rosbridge_server.drop_connections()  # whatever was still in flight is gone
    assert stream.done.wait(20)
    wait_subscribed(rosbridge_server, "/odom", REQUEST_TOPIC)  # the bridge came back by itself
    after = [zigzag_odometry(i) for i in range(600, 650)]
    for msg in after:
        rosbridge_server.publish("/odom", msg)
    barrier(rosbridge_server, "after-the-drop")
    snapshot = bridge.stop()

    received = snapshot.received["/odom"]
    assert snapshot.connects == 2 and snapshot.total("dropped") == 0
    stored = []
    for session in bridge_sessions(memory):
        stored.extend(stored_pose_x(memory, session["session_id"]))
    # Every pose that reached the bridge is stored (the zigzag keeps every point through RDP) ...
    assert len(stored) == len(set(stored)) == received
    # ... including all of those sent after the reconnect.
    assert {msg["pose"]["pose"]["position"]["x"] for msg in after} <= set(stored)


def test_stopping_writes_everything_received_even_what_was_still_buffered(
        rosbridge_server: RosbridgeTestServer, start_bridge, memory: Memory) -> None:
    # Chunks of an hour: nothing would be written before the end of the episode.
    bridge = start_bridge(rosbridge_server, BridgeConfig(chunk_seconds=3600.0))
    wait_subscribed(rosbridge_server, "/odom")
    for i in range(500):
        rosbridge_server.publish("/odom", zigzag_odometry(i))
    wait_received(bridge, "/odom", 500)
    assert bridge.snapshot().records_written == 0
    snapshot = bridge.stop()

    assert snapshot.fed["/odom"] == 500 and snapshot.episodes_ended == 1
    (session,) = bridge_sessions(memory)
    assert session["status"] == "ended"
    assert len(stored_pose_x(memory, session["session_id"])) == 500


def test_a_full_queue_drops_and_counts_instead_of_growing_while_the_store_is_locked(
        rosbridge_server: RosbridgeTestServer, start_bridge, memory: Memory) -> None:
    bridge = start_bridge(rosbridge_server, queue_capacity=1)
    wait_subscribed(rosbridge_server, "/odom")
    # Another process holds the database's write lock: the writer blocks on its first write.
    other = apsw.Connection(str(memory.path))
    other.execute("BEGIN IMMEDIATE")
    try:
        for i in range(5):
            rosbridge_server.publish("/odom", zigzag_odometry(i))
        assert bridge.wait_until(lambda s: s.total("received") + s.total("dropped") == 5, 10)
        during = bridge.snapshot()
    finally:
        other.execute("COMMIT")
        other.close()
    assert during.queue_peak == 1 and during.dropped["/odom"] >= 3
    assert f"drops {during.total('dropped')}" in format_status(None, during, 1.0)
    after = bridge.stop()
    assert after.fed == after.received  # what was accepted is written once the lock is gone
    (session,) = bridge_sessions(memory)
    assert len(stored_pose_x(memory, session["session_id"])) == after.received["/odom"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_robotmem_bridge_command_flushes_everything_received_on_signal(
        rosbridge_server: RosbridgeTestServer, robotmem_home: Path, signum: int) -> None:
    db = robotmem_home / "bridge.db"
    command = [sys.executable, "-m", "robotmem", "--db", str(db), "--json", "bridge", "--url", rosbridge_server.url,
               "--collection", "robot", "--robot-id", "tb3", "--status-interval", "0.2"]
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ))
    try:
        # Start-up (Python, imports, opening the store) may be slow on a busy machine.
        wait_subscribed(rosbridge_server, REQUEST_TOPIC, "/odom", LEARN, timeout=120)
        for i in range(200):
            rosbridge_server.publish("/odom", zigzag_odometry(i))
        rosbridge_server.publish(LEARN, m.string("the freight elevator needs a badge"))
        barrier(rosbridge_server, "before-the-signal", timeout=60)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    counters = json.loads(out)
    assert counters["received"] == counters["fed"] == {"/odom": 200, LEARN: 1}
    assert "bridge summary:" in err and "/odom: received 200, ingested 200, dropped 0" in err
    with Memory(db, collection="robot") as memory:
        (session,) = bridge_sessions(memory)
        assert session["status"] == "ended" and session["context"]["robot"]["id"] == "tb3"
        assert len(stored_pose_x(memory, session["session_id"])) == 200


def test_a_bridge_started_before_the_robot_side_connects_when_it_comes_up(
        rosbridge_server: RosbridgeTestServer, memory: Memory, fast_reconnect: dict[str, float]) -> None:
    rosbridge_server.stop()  # the port is known, nothing listens on it yet
    bridge = RosBridge(memory, BridgeConfig(), BridgeOptions(url=rosbridge_server.url, collection="robot",
                                                             **fast_reconnect))
    bridge.start()
    try:
        assert not bridge.connection.is_connected  # it retries with backoff meanwhile
        rosbridge_server.start()
        wait_subscribed(rosbridge_server, "/odom")
        for i in range(5):
            rosbridge_server.publish("/odom", zigzag_odometry(i))
        wait_received(bridge, "/odom", 5)
    finally:
        snapshot = bridge.stop()
    assert snapshot.connects == 1 and snapshot.fed == {"/odom": 5}
