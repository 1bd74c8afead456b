"""Small recordings made in the test, each with one property of a real robot's recording.

Written with rosbags' and mcap's own writers; message bytes come from rosbags' standard
ROS 2 Humble definitions.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcap.writer import Writer as McapWriter
from rosbags.rosbag2 import Writer
from rosbags.typesys import Stores, get_typestore
from ruamel.yaml import YAML

HUMBLE = get_typestore(Stores.ROS2_HUMBLE)
S = 1_000_000_000


@dataclass(frozen=True)
class Msg:
    topic: str
    msgtype: str
    log_ns: int
    value: Any


def header(stamp_ns: int, frame: str) -> Any:
    types = HUMBLE.types
    stamp = types["builtin_interfaces/msg/Time"](sec=stamp_ns // S, nanosec=stamp_ns % S)
    return types["std_msgs/msg/Header"](stamp=stamp, frame_id=frame)


def pose(x: float, y: float, z: float = 0.0) -> Any:
    types = HUMBLE.types
    return types["geometry_msgs/msg/Pose"](
        position=types["geometry_msgs/msg/Point"](x=x, y=y, z=z),
        orientation=types["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0))


def pose_with_covariance(stamp_ns: int, x: float, y: float, frame: str = "map") -> Any:
    import numpy as np

    types = HUMBLE.types
    inner = types["geometry_msgs/msg/PoseWithCovariance"](pose=pose(x, y), covariance=np.zeros(36))
    return types["geometry_msgs/msg/PoseWithCovarianceStamped"](header=header(stamp_ns, frame), pose=inner)


def odometry(stamp_ns: int, x: float, y: float, frame: str = "odom") -> Any:
    import numpy as np

    types = HUMBLE.types
    vector = types["geometry_msgs/msg/Vector3"]
    twist = types["geometry_msgs/msg/Twist"](linear=vector(x=0.0, y=0.0, z=0.0), angular=vector(x=0.0, y=0.0, z=0.0))
    return types["nav_msgs/msg/Odometry"](
        header=header(stamp_ns, frame), child_frame_id="base_link",
        pose=types["geometry_msgs/msg/PoseWithCovariance"](pose=pose(x, y), covariance=np.zeros(36)),
        twist=types["geometry_msgs/msg/TwistWithCovariance"](twist=twist, covariance=np.zeros(36)))


def string(text: str) -> Any:
    return HUMBLE.types["std_msgs/msg/String"](data=text)


def write_ros2_bag(folder: Path, messages: Iterable[Msg], *, type_definitions: bool = True) -> Path:
    """A rosbag2 sqlite3 folder; without type definitions it has Humble's layout (metadata
    version 5, no message_definitions table, no type hashes): what `ros2 bag record` wrote
    before Iron."""
    messages = list(messages)
    with Writer(folder, version=8) as writer:
        connections: dict[str, Any] = {}
        for msg in messages:
            if msg.topic not in connections:
                connections[msg.topic] = writer.add_connection(msg.topic, msg.msgtype, typestore=HUMBLE)
            writer.write(connections[msg.topic], msg.log_ns, HUMBLE.serialize_cdr(msg.value, msg.msgtype))
    if not type_definitions:
        _as_humble_layout(folder)
    return folder


def _as_humble_layout(folder: Path) -> None:
    db = next(folder.glob("*.db3"))
    with sqlite3.connect(db) as conn:
        conn.executescript(
            "DROP TABLE message_definitions; DROP TABLE schema; DROP TABLE metadata;"
            "CREATE TABLE topics_v5(id INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL,"
            " serialization_format TEXT NOT NULL, offered_qos_profiles TEXT NOT NULL);"
            "INSERT INTO topics_v5 SELECT id, name, type, serialization_format, offered_qos_profiles FROM topics;"
            "DROP TABLE topics; ALTER TABLE topics_v5 RENAME TO topics;")
    meta_path = folder / "metadata.yaml"
    yaml = YAML(typ="safe")
    meta = yaml.load(meta_path.read_text())
    info = meta["rosbag2_bagfile_information"]
    info["version"] = 5
    for key in ("custom_data", "ros_distro", "files"):
        info.pop(key, None)
    for topic in info["topics_with_message_count"]:
        topic["topic_metadata"].pop("type_description_hash", None)
    with open(meta_path, "w") as out:
        yaml.dump(meta, out)


def write_mcap(path: Path, messages: Iterable[Msg], *, empty_topics: dict[str, str] | None = None,
               **writer_options: Any) -> Path:
    """A plain ROS 2 MCAP (CDR, ros2msg schemas); ``empty_topics`` get a channel and no message.
    ``writer_options`` go to mcap's Writer (compression, chunk_size, ...)."""
    with open(path, "wb") as handle:
        writer = McapWriter(handle, **writer_options)
        writer.start(profile="ros2", library="robotmem-tests")
        channels: dict[str, int] = {}

        def channel(topic: str, msgtype: str) -> int:
            if topic not in channels:
                text = HUMBLE.generate_msgdef(msgtype, ros_version=2)[0]
                schema = writer.register_schema(name=msgtype, encoding="ros2msg", data=text.encode())
                channels[topic] = writer.register_channel(topic=topic, message_encoding="cdr", schema_id=schema)
            return channels[topic]

        for topic, msgtype in (empty_topics or {}).items():
            channel(topic, msgtype)
        for seq, msg in enumerate(messages):
            writer.add_message(channel(msg.topic, msg.msgtype), log_time=msg.log_ns, publish_time=msg.log_ns,
                               data=HUMBLE.serialize_cdr(msg.value, msg.msgtype), sequence=seq)
        writer.finish()
    return path


def navsat_fix(stamp_ns: int, lat: float, lon: float, alt: float, status: int = 0) -> Any:
    import numpy as np

    types = HUMBLE.types
    return types["sensor_msgs/msg/NavSatFix"](
        header=header(stamp_ns, "gps"), status=types["sensor_msgs/msg/NavSatStatus"](status=status, service=1),
        latitude=lat, longitude=lon, altitude=alt, position_covariance=np.zeros(9), position_covariance_type=0)


def write_mixed_encodings_mcap(path: Path) -> Path:
    """/odom (cdr) beside channels replay cannot decode as ROS: JSON with a JSON schema, JSON without a
    schema, protobuf, and a cdr channel whose schema is empty and no standard type."""
    with open(path, "wb") as handle:
        writer = McapWriter(handle)
        writer.start(profile="", library="robotmem-tests")
        text = HUMBLE.generate_msgdef("nav_msgs/msg/Odometry", ros_version=2)[0]
        odom = writer.register_channel("/odom", "cdr", writer.register_schema(
            "nav_msgs/msg/Odometry", "ros2msg", text.encode()))
        status = writer.register_channel("/status", "json", writer.register_schema(
            "robot.Status", "jsonschema", b'{"type": "object"}'))
        loose = writer.register_channel("/loose", "json", 0)
        proto = writer.register_channel("/pb", "protobuf", writer.register_schema("foo.Bar", "protobuf", b"\x0a\x00"))
        custom = writer.register_channel("/custom", "cdr", writer.register_schema("my_pkg/msg/Custom", "ros2msg", b""))
        for i in range(10):
            t = (100 + i) * S
            writer.add_message(odom, t, HUMBLE.serialize_cdr(odometry(t, i / 10, 0.0), "nav_msgs/msg/Odometry"), t)
            writer.add_message(status, t, json.dumps({"battery": 90 - i}).encode(), t)
            writer.add_message(loose, t, json.dumps({"n": i}).encode(), t)
            writer.add_message(proto, t, b"\x08\x01", t)
            writer.add_message(custom, t, b"\x00\x01\x00\x00" + bytes(8), t)
        writer.finish()
    return path


def joint_state(stamp_ns: int, angle: float) -> Any:
    import numpy as np

    return HUMBLE.types["sensor_msgs/msg/JointState"](
        header=header(stamp_ns, ""), name=["shoulder", "elbow"], position=np.array([angle, -angle]),
        velocity=np.zeros(2), effort=np.zeros(2))
