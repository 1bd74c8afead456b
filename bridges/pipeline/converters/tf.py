"""/tf and /tf_static -> a trajectory of one frame in another (map -> base_link by default).

Many robots publish their pose only as transforms. This converter keeps the latest
transform of every link (``/tf_static`` links for good) and, whenever the link that ends at
the child frame updates (odom -> base_link, tens of times a second), composes the chain
from the parent frame down to the child frame and feeds that pose to the ordinary pose
trajectory machinery (chunks, tracks, gaps, RDP; pose.py). The records are the same as a
pose topic's, with ``spatial.frame`` the parent frame and ``source.tf`` the frame pair.

Frame pair: ``tf_frames = ["map", "base_link"]`` in bridge.toml, or by default the first of
map -> base_link, map -> base_footprint, odom -> base_link, odom -> base_footprint the tree
connects (so a robot localised in a map is tracked in the map once the map frame appears;
a frame change starts a new chunk). A pose is taken whenever a message changes a link of
the chain, at the message's time (a recording's log time: TFMessage has no header).
"""

from __future__ import annotations

from typing import Any

from ..config import BridgeConfig, TopicRule
from ..geometry import check_position
from ..messages import RosMessage
from .pose import PoseTrajectoryConverter

__all__ = ["DEFAULT_FRAME_PAIRS", "TfTrajectoryConverter", "compose"]

DEFAULT_FRAME_PAIRS = (("map", "base_link"), ("map", "base_footprint"), ("odom", "base_link"),
                       ("odom", "base_footprint"))

Transform = tuple[tuple[float, float, float], tuple[float, float, float, float]]  # translation, (x, y, z, w)
_MAX_CHAIN = 64
#: tf2's QUATERNION_NORMALIZATION_TOLERANCE (buffer_core.cpp): | |q|^2 - 1 | must be below it
_QUATERNION_NORM_TOLERANCE = 10e-3


def compose(a: Transform, b: Transform) -> Transform:
    """a * b: the pose b (given in a's child frame) in a's parent frame."""
    (ax, ay, az), (qx, qy, qz, qw) = a
    (bx, by, bz), (rx, ry, rz, rw) = b
    # rotate b's translation by a's rotation: v' = v + 2w(q x v) + 2 q x (q x v)
    cx, cy, cz = qy * bz - qz * by, qz * bx - qx * bz, qx * by - qy * bx
    dx, dy, dz = qy * cz - qz * cy, qz * cx - qx * cz, qx * cy - qy * cx
    translation = (ax + bx + 2 * (qw * cx + dx), ay + by + 2 * (qw * cy + dy), az + bz + 2 * (qw * cz + dz))
    rotation = (qw * rx + qx * rw + qy * rz - qz * ry, qw * ry - qx * rz + qy * rw + qz * rx,
                qw * rz + qx * ry - qy * rx + qz * rw, qw * rw - qx * rx - qy * ry - qz * rz)
    return translation, rotation


def _transform(entry: dict[str, Any]) -> tuple[str, str, Transform]:
    """(parent, child, transform) of one geometry_msgs/TransformStamped."""
    t, r = entry["transform"]["translation"], entry["transform"]["rotation"]
    value = ((float(t["x"]), float(t["y"]), float(t["z"])),
             (float(r["x"]), float(r["y"]), float(r["z"]), float(r["w"])))
    check_position(*value[0])
    norm_sq = sum(v * v for v in value[1])
    # tf2's BufferCore refuses such a transform (TF_DENORMALIZED_QUATERNION) and so does this:
    # composing a chain through it would scale every translation after it (to overflow for 1e308).
    if not abs(norm_sq - 1.0) < _QUATERNION_NORM_TOLERANCE:  # NaN too
        raise ValueError(f"transform rotation is not a unit quaternion (|q|^2 = {norm_sq:g})")
    return _frame(entry["header"]["frame_id"]), _frame(entry["child_frame_id"]), value


def _frame(name: Any) -> str:
    if not isinstance(name, str) or not name.strip("/"):
        raise ValueError(f"frame name must be a non-empty string, got {name!r}")
    return name.strip("/")  # ROS 1 tf names may start with "/"


class TfTrajectoryConverter(PoseTrajectoryConverter):
    """One instance takes both /tf and /tf_static (the pipeline shares it)."""

    def __init__(self, topic: str, msgtype: str, rule: TopicRule, config: BridgeConfig) -> None:
        super().__init__(topic, msgtype, rule, config)
        if topic == "/tf_static":  # the shared converter speaks for /tf, whichever came first
            self.topic = "/tf"
        #: child frame -> (parent frame, latest transform)
        self._links: dict[str, tuple[str, Transform]] = {}
        self._pairs = (tuple(config.tf_frames),) if config.tf_frames else DEFAULT_FRAME_PAIRS

    def _poses(self, msg: RosMessage) -> list[tuple[float, float, float, float, float, float, float, str, str]]:
        """Take the message's transforms; the pose they make, its parent frame and "parent->child"
        (none when no chain is complete, or the message changed no link of the chain).

        The pair travels with the pose into the chunk buffer (pose.py): the chunk is written
        later, when the default pair may already have moved on (odom -> map as localisation
        starts), and its ``source.tf`` must name the pair its own points came from."""
        updated: set[str] = set()
        for entry in msg.data["transforms"]:
            parent, child, value = _transform(entry)
            self._links[child] = (parent, value)
            updated.add(child)
        for parent, child in self._pairs:  # the first pair the tree connects now
            found = self._chain(parent, child)
            if found is None:
                continue
            pose, links = found
            if not updated & links:
                return []
            (x, y, z), (qx, qy, qz, qw) = pose
            return [(x, y, z, qx, qy, qz, qw, parent, f"{parent}->{child}")]
        return []

    def _chain(self, parent: str, child: str) -> tuple[Transform, set[str]] | None:
        """The pose of ``child`` in ``parent`` through the latest links (and the links used), or None."""
        pose: Transform = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))
        frame = child
        used: set[str] = set()
        for _ in range(_MAX_CHAIN):
            if frame == parent:
                return pose, used
            link = self._links.get(frame)
            if link is None:
                return None
            used.add(frame)
            frame, value = link[0], link[1]
            pose = compose(value, pose)
        return None

    def feed(self, msg: RosMessage) -> bool:
        moved = False
        for pose in self._poses(msg):
            moved = self._feed_pose(msg.t_ns, *pose) or moved
        return moved

    def check(self, msg: RosMessage) -> None:
        for entry in msg.data["transforms"]:
            _transform(entry)

    def would_move(self, msg: RosMessage) -> bool:
        # only the latest links change: feeding the message again is the same
        return any(self._would_move_to(x, y, z, frame) for x, y, z, *_, frame, _pair in self._poses(msg))
