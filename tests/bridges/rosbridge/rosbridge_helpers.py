"""Helpers shared by the rosbridge tests (imported by name: the test folder is on sys.path)."""

from __future__ import annotations

import json
from typing import Any

from bridges.rosbridge.bridge import RosBridge
from bridges.rosbridge.recall import REQUEST_TOPIC, RESPONSE_TOPIC
from bridges.rosbridge.testing import RosbridgeTestServer
from bridges.rosbridge.testing import messages as m
from robotmem import Memory


def zigzag_odometry(i: int, t0: float = 50.0, dt: float = 0.5, ros_version: int = 2) -> dict[str, Any]:
    """Pose i of a zigzag whose every point is a corner (RDP keeps them all), at a walking pace."""
    return m.odometry(t0 + i * dt, x=0.1 * i, y=0.1 * (i % 2), ros_version=ros_version)


def wait_subscribed(server: RosbridgeTestServer, *topics: str, timeout: float = 10.0) -> None:
    for topic in topics:
        server.wait_for_subscription(topic, timeout)


def wait_received(bridge: RosBridge, topic: str, count: int, timeout: float = 20.0) -> None:
    assert bridge.wait_until(lambda s: s.received.get(topic, 0) >= count, timeout), (
        f"bridge received {bridge.snapshot().received.get(topic, 0)} of {count} messages on {topic}")


def bridge_sessions(memory: Memory, collection: str = "robot") -> list[dict[str, Any]]:
    """The sessions a bridge wrote, oldest first."""
    sessions = [s for s in memory.list_sessions(collection) if "url" in (s.get("context") or {}).get("source", {})]
    return sorted(sessions, key=lambda s: s["started_at"])


def records(memory: Memory, session_id: str, *, topic: str | None = None,
            perception_type: str | None = None) -> list[dict[str, Any]]:
    timeline = memory.session_timeline(session_id)["memories"]
    return [r for r in timeline
            if (topic is None or r["context"].get("source", {}).get("topic") == topic)
            and (perception_type is None or r.get("perception_type") == perception_type)]


def barrier(server: RosbridgeTestServer, request_id: str, timeout: float = 20.0) -> None:
    """Return once the bridge has read every frame the server sent before this call.

    A recall request travels the same ordered connection as the data, so its answer proves
    the bridge received everything published earlier.
    """
    server.publish(REQUEST_TOPIC, m.string(json.dumps({"id": request_id, "n": 1})))
    server.wait_for_message(RESPONSE_TOPIC, lambda msg: json.loads(msg["data"]).get("id") == request_id, timeout)


def stored_pose_x(memory: Memory, session_id: str, topic: str = "/odom") -> list[float]:
    """Every x stored in the pose-trajectory chunks of a session."""
    xs: list[float] = []
    for record in records(memory, session_id, topic=topic):
        xs.extend(memory.get_data(record["id"])["x"])
    return xs


def episode_summary(memory: Memory, session_id: str) -> dict[str, Any]:
    (summary,) = records(memory, session_id, perception_type="procedural")
    return summary
