"""Small recordings made in the test, each with one property of a real robot's recording.

Written with rosbags' and mcap's own writers; message bytes come from rosbags' standard
ROS 2 Humble definitions.
"""

from __future__ import annotations

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


def write_mcap(path: Path, messages: Iterable[Msg], *, empty_topics: dict[str, str] | None = None) -> Path:
    """A plain ROS 2 MCAP (CDR, ros2msg schemas); ``empty_topics`` get a channel and no message."""
    with open(path, "wb") as handle:
        writer = McapWriter(handle)
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
