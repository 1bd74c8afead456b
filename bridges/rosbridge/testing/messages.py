"""Messages in the exact JSON shape rosbridge puts on the wire, for ROS 1 and ROS 2.

rosbridge serialises a message as its fields by name; ``builtin_interfaces/Time`` is
``{"sec", "nanosec"}`` on ROS 2 and ``{"secs", "nsecs"}`` on ROS 1 (whose headers also
carry ``seq``); ``uint8[]`` fields (image data) are base64 strings; message types are
``pkg/msg/Type`` on ROS 2 and ``pkg/Type`` on ROS 1.
"""

from __future__ import annotations

import base64
import math
from typing import Any

__all__ = [
    "compressed_image",
    "header",
    "image",
    "joint_state",
    "laser_scan",
    "msgtype",
    "odometry",
    "pose_stamped",
    "pose_with_covariance_stamped",
    "stamp",
    "string",
]


def msgtype(package: str, name: str, ros_version: int = 2) -> str:
    return f"{package}/msg/{name}" if ros_version == 2 else f"{package}/{name}"


def stamp(t_s: float, ros_version: int = 2) -> dict[str, int]:
    sec = math.floor(t_s)
    nanosec = round((t_s - sec) * 1e9)
    if nanosec >= 1_000_000_000:
        sec, nanosec = sec + 1, nanosec - 1_000_000_000
    return {"sec": sec, "nanosec": nanosec} if ros_version == 2 else {"secs": sec, "nsecs": nanosec}


def header(t_s: float, frame_id: str, ros_version: int = 2, seq: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"stamp": stamp(t_s, ros_version), "frame_id": frame_id}
    if ros_version == 1:
        out = {"seq": seq, **out}
    return out


def _quaternion_from_yaw(yaw: float) -> dict[str, float]:
    return {"x": 0.0, "y": 0.0, "z": math.sin(yaw / 2.0), "w": math.cos(yaw / 2.0)}


def _pose(x: float, y: float, z: float, yaw: float) -> dict[str, Any]:
    return {"position": {"x": x, "y": y, "z": z}, "orientation": _quaternion_from_yaw(yaw)}


def odometry(t_s: float, x: float, y: float, yaw: float = 0.0, *, z: float = 0.0, vx: float = 0.0,
             wz: float = 0.0, frame_id: str = "odom", ros_version: int = 2, seq: int = 0) -> dict[str, Any]:
    return {
        "header": header(t_s, frame_id, ros_version, seq),
        "child_frame_id": "base_footprint",
        "pose": {"pose": _pose(x, y, z, yaw), "covariance": [0.0] * 36},
        "twist": {
            "twist": {"linear": {"x": vx, "y": 0.0, "z": 0.0}, "angular": {"x": 0.0, "y": 0.0, "z": wz}},
            "covariance": [0.0] * 36,
        },
    }


def pose_stamped(t_s: float, x: float, y: float, yaw: float = 0.0, *, z: float = 0.0, frame_id: str = "map",
                 ros_version: int = 2) -> dict[str, Any]:
    return {"header": header(t_s, frame_id, ros_version), "pose": _pose(x, y, z, yaw)}


def pose_with_covariance_stamped(t_s: float, x: float, y: float, yaw: float = 0.0, *, frame_id: str = "map",
                                 ros_version: int = 2) -> dict[str, Any]:
    return {"header": header(t_s, frame_id, ros_version),
            "pose": {"pose": _pose(x, y, 0.0, yaw), "covariance": [0.0] * 36}}


def joint_state(t_s: float, names: list[str], positions: list[float], velocities: list[float] | None = None,
                efforts: list[float] | None = None, *, ros_version: int = 2) -> dict[str, Any]:
    return {
        "header": header(t_s, "", ros_version),
        "name": list(names),
        "position": list(positions),
        "velocity": list(velocities) if velocities is not None else [0.0] * len(names),
        "effort": list(efforts) if efforts is not None else [],
    }


def image(t_s: float, width: int, height: int, *, encoding: str = "rgb8", frame_id: str = "camera",
          ros_version: int = 2) -> dict[str, Any]:
    """A gradient image; ``data`` is base64 as rosbridge sends ``uint8[]``."""
    channels = {"rgb8": 3, "bgr8": 3, "rgba8": 4, "mono8": 1}[encoding]
    pixels = bytes((x * 255 // max(width - 1, 1)) & 0xFF for _y in range(height) for x in range(width)
                   for _c in range(channels))
    return {
        "header": header(t_s, frame_id, ros_version),
        "height": height,
        "width": width,
        "encoding": encoding,
        "is_bigendian": 0,
        "step": width * channels,
        "data": base64.b64encode(pixels).decode("ascii"),
    }


def compressed_image(t_s: float, payload: bytes, *, fmt: str = "jpeg", frame_id: str = "camera",
                     ros_version: int = 2) -> dict[str, Any]:
    return {"header": header(t_s, frame_id, ros_version), "format": fmt,
            "data": base64.b64encode(payload).decode("ascii")}


def laser_scan(t_s: float, ranges: list[float | None], *, angle_min: float = -math.pi,
               angle_max: float = math.pi, range_min: float = 0.1, range_max: float = 10.0,
               frame_id: str = "base_scan", ros_version: int = 2) -> dict[str, Any]:
    """``None`` in ``ranges`` is how rosbridge's JSON carries inf/NaN readings."""
    increment = (angle_max - angle_min) / max(len(ranges) - 1, 1)
    return {
        "header": header(t_s, frame_id, ros_version),
        "angle_min": angle_min,
        "angle_max": angle_max,
        "angle_increment": increment,
        "time_increment": 0.0,
        "scan_time": 0.2,
        "range_min": range_min,
        "range_max": range_max,
        "ranges": list(ranges),
        "intensities": [],
    }


def string(data: str) -> dict[str, Any]:
    return {"data": data}
