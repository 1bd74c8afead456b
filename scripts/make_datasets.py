#!/usr/bin/env python3
"""Generate the sample recordings in datasets/ (deterministic: same bytes every run).

    python scripts/make_datasets.py [--out datasets]

* ``nav_demo.mcap`` - a simulated differential-drive robot in a small flat: it fetches a
  cup from the kitchen and returns to its dock. Plain MCAP (ros2 profile, CDR), written
  with mcap-ros2-support and the ROS 2 Humble message definitions from rosbags.
* ``arm_push_ros2/`` - a 6-joint arm pushing a block three times; a ROS 2 bag folder
  (metadata.yaml + sqlite3 .db3) written with rosbags' rosbag2 writer.

See datasets/README.md for the topics. The simulation is numpy with a fixed seed; the
message times start at a fixed epoch, so nothing depends on the clock.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from mcap.writer import CompressionType
from mcap_ros2._dynamic import serialize_dynamic
from mcap_ros2.writer import Writer as McapRos2Writer
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Bag2Writer
from rosbags.typesys import Stores, get_typestore

T0_NS = 1_735_689_600_000_000_000  # 2025-01-01T00:00:00Z: a fixed start, not the clock
SEED = 7
TYPESTORE = get_typestore(Stores.ROS2_HUMBLE)

Message = tuple[int, str, str, dict[str, Any]]  # (t_ns, topic, msgtype, data)


# -- message builders (rosbridge-shaped dicts) ------------------------------------------------
def stamp(t_ns: int) -> dict[str, int]:
    return {"sec": t_ns // 1_000_000_000, "nanosec": t_ns % 1_000_000_000}


def header(t_ns: int, frame: str) -> dict[str, Any]:
    return {"stamp": stamp(t_ns), "frame_id": frame}


def quaternion(yaw: float) -> dict[str, float]:
    return {"x": 0.0, "y": 0.0, "z": math.sin(yaw / 2), "w": math.cos(yaw / 2)}


def odometry(t_ns: int, x: float, y: float, yaw: float, v: float, w: float) -> dict[str, Any]:
    covariance = [0.0] * 36
    return {
        "header": header(t_ns, "odom"),
        "child_frame_id": "base_link",
        "pose": {"pose": {"position": {"x": x, "y": y, "z": 0.0}, "orientation": quaternion(yaw)},
                 "covariance": covariance},
        "twist": {"twist": {"linear": {"x": v, "y": 0.0, "z": 0.0}, "angular": {"x": 0.0, "y": 0.0, "z": w}},
                  "covariance": covariance},
    }


def joint_state(t_ns: int, names: list[str], positions: list[float], velocities: list[float]) -> dict[str, Any]:
    return {"header": header(t_ns, ""), "name": names, "position": positions, "velocity": velocities,
            "effort": []}


def string(text: str) -> dict[str, Any]:
    return {"data": text}


# -- the flat: walls and furniture as axis-aligned boxes (for the laser) ---------------------
FLAT = (-1.0, -1.0, 8.0, 5.0)  # xmin, ymin, xmax, ymax
BOXES = [(2.8, -1.0, 3.2, 1.0), (2.8, 2.0, 3.2, 5.0), (5.5, 3.6, 7.0, 5.0), (0.5, 3.5, 1.5, 4.5)]


def laser_scan(t_ns: int, x: float, y: float, yaw: float, rng: np.random.Generator) -> dict[str, Any]:
    beams = 180
    angles = yaw + np.linspace(-math.pi, math.pi, beams, endpoint=False)
    ranges = _raycast(x, y, angles) + rng.normal(0.0, 0.01, beams)
    ranges = np.where(ranges > 8.0, np.inf, ranges)
    return {
        "header": header(t_ns, "base_scan"), "angle_min": -math.pi, "angle_max": math.pi - 2 * math.pi / beams,
        "angle_increment": 2 * math.pi / beams, "time_increment": 0.0, "scan_time": 0.5,
        "range_min": 0.12, "range_max": 8.0, "ranges": ranges.astype(np.float32).tolist(), "intensities": [],
    }


def _raycast(x: float, y: float, angles: np.ndarray) -> np.ndarray:
    dx, dy = np.cos(angles), np.sin(angles)
    with np.errstate(divide="ignore", invalid="ignore"):
        xmin, ymin, xmax, ymax = FLAT
        inside = np.minimum(np.where(dx > 0, (xmax - x) / dx, (xmin - x) / dx),
                            np.where(dy > 0, (ymax - y) / dy, (ymin - y) / dy))
        best = inside
        for bx0, by0, bx1, by1 in BOXES:
            t1, t2 = (bx0 - x) / dx, (bx1 - x) / dx
            t3, t4 = (by0 - y) / dy, (by1 - y) / dy
            near = np.maximum(np.minimum(t1, t2), np.minimum(t3, t4))
            far = np.minimum(np.maximum(t1, t2), np.maximum(t3, t4))
            hit = (near <= far) & (near > 0)
            best = np.where(hit & (near < best), near, best)
    return np.asarray(best, dtype=np.float64)


def camera_image(t_ns: int, x: float, y: float) -> dict[str, Any]:
    """A tiny rgb8 frame whose colour says which room the robot is in (hall blue, kitchen yellow)."""
    width, height = 32, 24
    room = np.array([230, 200, 60] if x > 3.0 else [60, 110, 220], dtype=np.float64)
    shade = np.linspace(0.6, 1.0, height)[:, None, None] * np.ones((1, width, 1))
    pixels = (shade * room).astype(np.uint8)
    return {"header": header(t_ns, "camera"), "height": height, "width": width, "encoding": "rgb8",
            "is_bigendian": 0, "step": width * 3, "data": pixels.tobytes()}


# -- the navigation demo -----------------------------------------------------------------------
WHEEL_RADIUS, WHEEL_SEPARATION = 0.033, 0.16


def drive(route: list[tuple[float, float]], start: tuple[float, float, float], rng: np.random.Generator,
          dt: float = 0.05) -> Iterator[tuple[float, float, float, float, float]]:
    """Unicycle following waypoints: yields (x, y, yaw, v, w) every ``dt`` seconds."""
    x, y, yaw = start
    for gx, gy in route:
        while math.hypot(gx - x, gy - y) > 0.05:
            heading = math.atan2(gy - y, gx - x)
            error = math.atan2(math.sin(heading - yaw), math.cos(heading - yaw))
            w = max(-1.5, min(1.5, 2.5 * error))
            v = 0.0 if abs(error) > 0.6 else min(0.4, 0.8 * math.hypot(gx - x, gy - y))
            v += float(rng.normal(0.0, 0.005))
            x += v * math.cos(yaw) * dt
            y += v * math.sin(yaw) * dt
            yaw = math.atan2(math.sin(yaw + w * dt), math.cos(yaw + w * dt))
            yield x, y, yaw, v, w


def nav_demo_messages() -> list[Message]:
    rng = np.random.default_rng(SEED)
    odom_type, joint_type = "nav_msgs/msg/Odometry", "sensor_msgs/msg/JointState"
    messages: list[Message] = []
    t = T0_NS
    step_ns = 50_000_000
    wheels = [0.0, 0.0]
    pose = (0.0, 0.0, 0.0)
    legs = [
        ({"task": {"name": "fetch_cup", "goal": "kitchen counter"}}, [(2.2, 1.5), (3.8, 1.5), (6.2, 3.0)], 0.9,
         [(3.0, "The doorway between hall and kitchen at (3.0, 1.5) is narrow: slow to 0.2 m/s",
           {"spatial": {"position": [3.0, 1.5, 0.0]}}),
          (6.2, "The cup is on the kitchen counter next to the window", {"spatial": {"position": [6.2, 3.4, 0.0]}})]),
        ({"task": {"name": "return_to_dock", "goal": "dock"}}, [(3.8, 1.5), (2.2, 1.5), (0.5, 0.0), (0.0, 0.0)], 1.0,
         [(0.5, "Approach the charging dock from +x, facing west", {"spatial": {"position": [0.0, 0.0, 0.0]}})]),
    ]
    for context, route, score, notes in legs:
        messages.append((t, "/robotmem/episode", "std_msgs/msg/String", string("start " + json.dumps(context))))
        t += step_ns
        pending = list(notes)
        for i, (x, y, yaw, v, w) in enumerate(drive(route, pose, rng)):
            t += step_ns
            messages.append((t, "/odom", odom_type, odometry(t, x, y, yaw, v, w)))
            wheels[0] += (v - w * WHEEL_SEPARATION / 2) / WHEEL_RADIUS * 0.05
            wheels[1] += (v + w * WHEEL_SEPARATION / 2) / WHEEL_RADIUS * 0.05
            if i % 2 == 0:
                velocity = [(v - w * WHEEL_SEPARATION / 2) / WHEEL_RADIUS, (v + w * WHEEL_SEPARATION / 2) / WHEEL_RADIUS]
                messages.append((t, "/joint_states", joint_type,
                                 joint_state(t, ["wheel_left_joint", "wheel_right_joint"], list(wheels), velocity)))
            if i % 10 == 0:
                messages.append((t, "/scan", "sensor_msgs/msg/LaserScan", laser_scan(t, x, y, yaw, rng)))
            if i % 20 == 0:
                messages.append((t, "/camera/image_raw", "sensor_msgs/msg/Image", camera_image(t, x, y)))
            if pending and abs(x - pending[0][0]) < 0.05:
                _, insight, note_context = pending.pop(0)
                messages.append((t, "/robotmem/learn", "std_msgs/msg/String",
                                 string(json.dumps({"insight": insight, "context": note_context}))))
            pose = (x, y, yaw)
        t += 2 * step_ns
        messages.append((t, "/robotmem/episode", "std_msgs/msg/String", string(f"end {score}")))
        t += 40 * step_ns  # a pause between the errands
    return messages


# -- the arm push ------------------------------------------------------------------------------
ARM_JOINTS = ["shoulder_pan", "shoulder_lift", "elbow", "wrist_1", "wrist_2", "wrist_3"]


def arm_push_messages() -> list[Message]:
    rng = np.random.default_rng(SEED + 1)
    messages: list[Message] = []
    t = T0_NS + 3_600_000_000_000
    step_ns = 20_000_000  # 50 Hz
    home = np.array([0.0, -1.2, 1.6, -1.9, -1.57, 0.0])
    for attempt, (push_m, score) in enumerate([(0.10, 0.4), (0.18, 0.7), (0.25, 1.0)]):
        context = {"task": {"name": "push_block", "attempt": attempt + 1, "target_distance_m": 0.25},
                   "params": {"push_distance_m": push_m}}
        messages.append((t, "/robotmem/episode", "std_msgs/msg/String", string("start " + json.dumps(context))))
        steps = 200
        for i in range(steps):
            t += step_ns
            phase = math.sin(math.pi * i / (steps - 1))
            target = home + phase * np.array([0.3, 0.4 * push_m / 0.25, -0.5 * push_m / 0.25, 0.1, 0.0, 0.2])
            positions = (target + rng.normal(0.0, 0.0005, 6)).tolist()
            messages.append((t, "/joint_states", "sensor_msgs/msg/JointState",
                             joint_state(t, ARM_JOINTS, positions, [0.0] * 6)))
            if i % 5 == 0:
                ee = {"header": header(t, "base_link"),
                      "pose": {"position": {"x": 0.45 + push_m * phase, "y": 0.0, "z": 0.12}, "orientation": quaternion(0.0)}}
                messages.append((t, "/ee_pose", "geometry_msgs/msg/PoseStamped", ee))
        if score < 1.0:
            note = f"Push of {push_m:.2f} m left the block short of the 0.25 m target"
        else:
            note = "Pushing 0.25 m with the wrist level reaches the target without toppling the block"
        messages.append((t, "/robotmem/learn", "std_msgs/msg/String",
                         string(json.dumps({"insight": note, "context": {"params": {"push_distance_m": push_m}}}))))
        t += step_ns
        messages.append((t, "/robotmem/episode", "std_msgs/msg/String", string(f"end {score}")))
        t += 50 * step_ns
    return messages


# -- writers -----------------------------------------------------------------------------------
def msgdef(msgtype: str) -> str:
    return str(TYPESTORE.generate_msgdef(msgtype, ros_version=2)[0])


def write_mcap(path: Path, messages: list[Message]) -> None:
    with open(path, "wb") as handle:
        writer = McapRos2Writer(handle, compression=CompressionType.ZSTD)
        schemas = {}
        for t_ns, topic, msgtype, data in messages:
            if msgtype not in schemas:
                schemas[msgtype] = writer.register_msgdef(msgtype, msgdef(msgtype))
            writer.write_message(topic, schemas[msgtype], data, log_time=t_ns, publish_time=t_ns)
        writer.finish()


def write_ros2_bag(folder: Path, messages: list[Message], storage: str = "sqlite3") -> None:
    """A ROS 2 bag folder; ``storage`` "sqlite3" (.db3) or "mcap"."""
    if folder.exists():
        shutil.rmtree(folder)
    encoders = {m: serialize_dynamic(m, msgdef(m))[m] for m in {msg[2] for msg in messages}}
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    with Bag2Writer(folder, version=8, storage_plugin=plugin) as writer:
        connections = {}
        for t_ns, topic, msgtype, data in messages:
            if topic not in connections:
                connections[topic] = writer.add_connection(topic, msgtype, typestore=TYPESTORE)
            writer.write(connections[topic], t_ns, encoders[msgtype](data))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "datasets")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    write_mcap(args.out / "nav_demo.mcap", nav_demo_messages())
    write_ros2_bag(args.out / "arm_push_ros2", arm_push_messages())
    for path in sorted(args.out.rglob("*")):
        if path.is_file() and path.suffix in (".mcap", ".db3", ".yaml"):
            print(f"{path.relative_to(args.out)}  {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
