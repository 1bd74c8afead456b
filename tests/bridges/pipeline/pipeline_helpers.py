"""Builders for RosMessages in the rosbridge JSON shape, and reading back what was stored."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from bridges.pipeline import BridgeConfig, FileEpisodes, Pipeline, RetryPolicy, RosMessage
from robotmem import Memory

S = 1_000_000_000
T0 = 1_700_000_000 * S


def stamp(t_ns: int) -> dict[str, int]:
    return {"sec": t_ns // S, "nanosec": t_ns % S}


def odom(t_ns: int, x: float, y: float, z: float = 0.0, yaw: float = 0.0, frame: str = "odom",
         topic: str = "/odom") -> RosMessage:
    pose = {"position": {"x": x, "y": y, "z": z},
            "orientation": {"x": 0.0, "y": 0.0, "z": math.sin(yaw / 2), "w": math.cos(yaw / 2)}}
    data = {"header": {"stamp": stamp(t_ns), "frame_id": frame}, "child_frame_id": "base_link",
            "pose": {"pose": pose, "covariance": [0.0] * 36},
            "twist": {"twist": {"linear": {"x": 0.0, "y": 0.0, "z": 0.0}, "angular": {"x": 0.0, "y": 0.0, "z": 0.0}},
                      "covariance": [0.0] * 36}}
    return RosMessage(topic, "nav_msgs/msg/Odometry", t_ns, data)


def pose_stamped(t_ns: int, x: float, y: float, z: float = 0.0, frame: str = "map", topic: str = "/pose") -> RosMessage:
    data = {"header": {"stamp": stamp(t_ns), "frame_id": frame},
            "pose": {"position": {"x": x, "y": y, "z": z}, "orientation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}}}
    return RosMessage(topic, "geometry_msgs/msg/PoseStamped", t_ns, data)


def joints(t_ns: int, positions: list[float], names: list[str] | None = None, topic: str = "/joint_states") -> RosMessage:
    names = names or [f"j{i}" for i in range(len(positions))]
    data = {"header": {"stamp": stamp(t_ns), "frame_id": ""}, "name": names, "position": positions,
            "velocity": [0.1] * len(positions), "effort": []}
    return RosMessage(topic, "sensor_msgs/msg/JointState", t_ns, data)


def image(t_ns: int) -> RosMessage:
    """A 4x4 rgb8 camera frame."""
    data = {"header": {"stamp": stamp(t_ns), "frame_id": "camera"}, "height": 4, "width": 4, "encoding": "rgb8",
            "is_bigendian": 0, "step": 12, "data": bytes(48)}
    return RosMessage("/camera/image_raw", "sensor_msgs/msg/Image", t_ns, data)


def text(t_ns: int, topic: str, value: str) -> RosMessage:
    return RosMessage(topic, "std_msgs/msg/String", t_ns, {"data": value})


def marker(t_ns: int, value: str) -> RosMessage:
    return text(t_ns, "/robotmem/episode", value)


def learn(t_ns: int, value: str) -> RosMessage:
    return text(t_ns, "/robotmem/learn", value)


def straight_drive(start_ns: int, seconds: float, hz: float = 20.0, speed: float = 0.5,
                   origin: tuple[float, float] = (0.0, 0.0)) -> list[RosMessage]:
    """Odometry along +x at ``speed`` m/s."""
    n = int(seconds * hz)
    return [odom(start_ns + int(i * S / hz), origin[0] + speed * i / hz, origin[1]) for i in range(n)]


def records(mem: Memory, session_id: str) -> list[dict[str, Any]]:
    """Active records of a session, in time order."""
    return [m for m in mem.session_timeline(session_id)["memories"] if m.get("status", "active") == "active"]


def by_topic(mem: Memory, session_id: str, topic: str) -> list[dict[str, Any]]:
    return [m for m in records(mem, session_id) if m["context"].get("source", {}).get("topic") == topic]


def summary_of(mem: Memory, session_id: str) -> dict[str, Any]:
    found = [m for m in records(mem, session_id) if m["perception_type"] == "procedural"]
    assert len(found) == 1, f"expected one episode summary, found {len(found)}"
    return found[0]


def stored_path(mem: Memory, session_id: str, topic: str) -> np.ndarray:
    """The stored (downsampled) trajectory of a topic: chunks concatenated in time order, (n, 3)."""
    chunks = sorted(by_topic(mem, session_id, topic), key=lambda m: m["context"]["episode"]["t_start_ns"])
    parts = []
    for chunk in chunks:
        data = mem.get_data(chunk["id"])
        parts.append(np.column_stack([data["x"], data["y"], data["z"]]))
    return np.concatenate(parts) if parts else np.zeros((0, 3))


def dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class ManualClock:
    """Retry backoff time under a test's control (the outage it waits out is real)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def feed_docking_episode(pipeline: Any) -> list[RosMessage]:
    """A 25 s docking episode with a note: three odometry chunks, the note and the summary to write."""
    pipeline.feed(marker(T0, 'start {"task": {"name": "dock"}}'))
    drive = straight_drive(T0, seconds=25)
    for msg in drive:
        pipeline.feed(msg)
    pipeline.feed(learn(T0 + 5 * S, "The dock is behind the pillar"))
    pipeline.feed(marker(T0 + 26 * S, "end 0.8"))
    pipeline.tick(T0 + 29 * S)  # late_grace_s (2 s) after the end has passed: the episode is finished
    return drive


def assert_docking_episode_written_once(mem: Memory, pipeline: Any, drive: list[RosMessage]) -> None:
    """Everything feed_docking_episode gave the pipeline is in the store, once, nothing dropped."""
    stats = pipeline.stats
    assert pipeline.writer.pending_records == 0 and stats.records_dropped == 0
    (session,) = stats.session_ids
    assert mem.get_session(session)["outcome_score"] == 0.8
    chunks = by_topic(mem, session, "/odom")
    assert sum(mem.get_data(c["id"])["raw_points"] for c in chunks) == len(drive)  # every pose, once
    assert [m["content"] for m in records(mem, session) if m["type"] == "fact"] == ["The dock is behind the pillar"]
    assert summary_of(mem, session)["task"]["name"] == "dock"


def kept_frame(t_ns: int, size: int) -> RosMessage:
    """A CompressedImage kept as it is (compressed_image_max_bytes): its record holds ``size`` bytes."""
    data = {"header": {"stamp": {"sec": 0, "nanosec": 0}, "frame_id": "cam"}, "format": "jpeg", "data": bytes(size)}
    return RosMessage("/cam/compressed", "sensor_msgs/msg/CompressedImage", t_ns, data)


FRAME_BYTES = 500_000
FRAMES_SENT = 45
HELD_BOUND = 12_000_000


def feed_kept_frames_while_the_store_fails(mem: Memory) -> Pipeline:
    """45 frames of 500 KB kept as records, one a second (a batch of ten every 10 s chunk, 5 MB),
    into a store that refuses writes; checks the held bytes stayed under the bound."""
    clock = ManualClock()
    pipeline = Pipeline(mem, BridgeConfig(compressed_image_max_bytes=FRAME_BYTES), collection="test",
                        robot_id="bot-1", episode_policy=FileEpisodes(), source="ws://robot:9090",
                        write_retry=RetryPolicy(clock=clock, sleep=clock.advance, max_pending_bytes=HELD_BOUND))
    for i in range(FRAMES_SENT):
        pipeline.feed(kept_frame(T0 + i * S, FRAME_BYTES))
        clock.advance(1.0)
    assert pipeline.stats.records_dropped > 0
    assert FRAME_BYTES * pipeline.writer.pending_records <= pipeline.writer.pending_bytes <= HELD_BOUND
    assert pipeline.stats.topics["/cam/compressed"].store_dropped == pipeline.stats.records_dropped
    return pipeline


def assert_kept_frames_stored_or_counted(mem: Memory, pipeline: Pipeline) -> None:
    (session,) = pipeline.stats.session_ids
    stored = by_topic(mem, session, "/cam/compressed")
    assert len(stored) + pipeline.stats.records_dropped == FRAMES_SENT
    assert all(mem.get_data(r["id"])["bytes"] == FRAME_BYTES for r in stored)
