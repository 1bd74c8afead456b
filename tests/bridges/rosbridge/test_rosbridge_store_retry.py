"""The live bridge while another process holds the store's write lock past the busy timeout."""

from __future__ import annotations

import apsw
import pytest
from rosbridge_helpers import (
    bridge_sessions,
    stored_pose_x,
    wait_received,
    wait_subscribed,
    zigzag_odometry,
)

from bridges.rosbridge.status import format_status, format_summary
from bridges.rosbridge.testing import RosbridgeTestServer
from bridges.rosbridge.testing import messages as m
from robotmem import Memory

EPISODE = "/robotmem/episode"


def test_a_store_locked_past_its_busy_timeout_delays_the_writes_and_loses_nothing(
        rosbridge_server: RosbridgeTestServer, start_bridge_on_busy_store, busy_memory: Memory) -> None:
    bridge = start_bridge_on_busy_store(rosbridge_server)
    wait_subscribed(rosbridge_server, "/odom", EPISODE)
    rosbridge_server.publish(EPISODE, m.string("start"))
    for i in range(10):
        rosbridge_server.publish("/odom", zigzag_odometry(i))
    assert bridge.wait_until(lambda s: s.fed.get("/odom", 0) == 10, 20)  # the session is stored

    other = apsw.Connection(str(busy_memory.path))  # a second process, as far as SQLite can tell
    other.execute("BEGIN IMMEDIATE")
    try:
        for i in range(10, 40):  # a 10 s chunk completes while the store is locked
            rosbridge_server.publish("/odom", zigzag_odometry(i))
        rosbridge_server.publish(EPISODE, m.string("end 0.5"))
        wait_received(bridge, EPISODE, 2)
        # the chunk, then the summary once late_grace_s after `end` has passed (the episode is finished)
        assert bridge.wait_until(lambda s: s.write_retries >= 2 and s.total("fed") == 42 and s.held_records >= 2, 20)
        during = bridge.snapshot()
    finally:
        other.execute("COMMIT")
        other.close()
    assert during.records_written == 0 and during.held_records >= 2 and during.feed_errors == 0
    assert f"store retries {during.write_retries} held {during.held_records}" in format_status(None, during, 1.0)

    assert bridge.wait_until(lambda s: s.held_records == 0 and s.episodes_ended == 1, 20)
    after = bridge.stop()
    assert after.store_dropped == 0 and after.feed_errors == 0
    assert "records given up 0" in format_summary(after, 1.0)
    (session,) = bridge_sessions(busy_memory)
    assert session["status"] == "ended" and session["outcome_score"] == 0.5
    assert sorted(stored_pose_x(busy_memory, session["session_id"])) == pytest.approx([0.1 * i for i in range(40)])
