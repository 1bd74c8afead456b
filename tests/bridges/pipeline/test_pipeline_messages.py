"""RosMessage normalisation: type names, decoded objects -> plain data, message time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rosbags.typesys import Stores, get_typestore

from bridges.pipeline.messages import (
    header_stamp_ns,
    message_time_ns,
    normalize_msgtype,
    to_plain,
)

REPO = Path(__file__).resolve().parents[3]
TYPESTORE = get_typestore(Stores.ROS2_HUMBLE)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nav_msgs/Odometry", "nav_msgs/msg/Odometry"),
        ("nav_msgs/msg/Odometry", "nav_msgs/msg/Odometry"),
        (" std_msgs/String ", "std_msgs/msg/String"),
    ],
)
def test_ros1_and_ros2_type_names_normalise_to_pkg_msg_type(name: str, expected: str) -> None:
    assert normalize_msgtype(name) == expected


@pytest.mark.parametrize("name", ["Odometry", "nav_msgs/srv/Odometry", "a/b/c/d", "", "nav msgs/Odometry"])
def test_a_malformed_type_name_is_rejected_with_the_name_in_the_message(name: str) -> None:
    with pytest.raises(ValueError, match="not a ROS message type name"):
        normalize_msgtype(name)


def _odometry_object() -> object:
    t = TYPESTORE.types
    header = t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=12, nanosec=5), frame_id="odom")
    pose = t["geometry_msgs/msg/Pose"](
        position=t["geometry_msgs/msg/Point"](x=1.0, y=2.0, z=3.0),
        orientation=t["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
    )
    twist = t["geometry_msgs/msg/Twist"](
        linear=t["geometry_msgs/msg/Vector3"](x=0.5, y=0.0, z=0.0),
        angular=t["geometry_msgs/msg/Vector3"](x=0.0, y=0.0, z=0.1),
    )
    return t["nav_msgs/msg/Odometry"](
        header=header, child_frame_id="base_link",
        pose=t["geometry_msgs/msg/PoseWithCovariance"](pose=pose, covariance=np.arange(36, dtype=np.float64)),
        twist=t["geometry_msgs/msg/TwistWithCovariance"](twist=twist, covariance=np.zeros(36)),
    )


def test_a_rosbags_object_becomes_nested_dicts_with_lists_for_float_arrays() -> None:
    data = to_plain(TYPESTORE.deserialize_cdr(TYPESTORE.serialize_cdr(_odometry_object(), "nav_msgs/msg/Odometry"),
                                              "nav_msgs/msg/Odometry"))
    assert data["header"] == {"stamp": {"sec": 12, "nanosec": 5}, "frame_id": "odom"}
    assert data["pose"]["pose"]["position"] == {"x": 1.0, "y": 2.0, "z": 3.0}
    assert data["pose"]["covariance"] == [float(i) for i in range(36)]
    assert "__msgtype__" not in data


def test_uint8_arrays_become_bytes() -> None:
    t = TYPESTORE.types
    image = t["sensor_msgs/msg/Image"](
        header=t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=1, nanosec=0), frame_id="cam"),
        height=1, width=2, encoding="mono8", is_bigendian=0, step=2, data=np.array([7, 9], dtype=np.uint8),
    )
    assert to_plain(image)["data"] == b"\x07\x09"


def test_mcap_ros2_and_rosbags_decoding_give_the_same_plain_data() -> None:
    """Both decoders of the same MCAP message normalise to one shape."""
    with open(REPO / "datasets" / "nav_demo.mcap", "rb") as handle:
        reader = make_reader(handle, decoder_factories=[DecoderFactory()])
        for schema, _channel, message, decoded in reader.iter_decoded_messages(topics=["/odom", "/scan"]):
            assert schema is not None
            ours = to_plain(TYPESTORE.deserialize_cdr(message.data, schema.name))
            theirs = to_plain(decoded)
            assert ours == theirs
            if schema.name.endswith("LaserScan"):
                break


def test_ros1_time_fields_secs_nsecs_are_renamed_to_sec_nanosec() -> None:
    data = to_plain({"header": {"stamp": {"secs": 3, "nsecs": 4}, "frame_id": "map"}, "data": [1, 2]})
    assert data == {"header": {"stamp": {"sec": 3, "nanosec": 4}, "frame_id": "map"}, "data": [1, 2]}


def test_message_time_is_the_header_stamp_when_set_else_the_fallback() -> None:
    stamped = {"header": {"stamp": {"sec": 2, "nanosec": 500}}}
    unstamped = {"header": {"stamp": {"sec": 0, "nanosec": 0}}}
    assert header_stamp_ns(stamped) == 2_000_000_500
    assert message_time_ns(stamped, 99) == 2_000_000_500
    assert message_time_ns(unstamped, 99) == 99
    assert message_time_ns({"data": "no header"}, 42) == 42


def test_an_object_that_is_not_a_message_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="cannot convert"):
        to_plain({"field": object()})
