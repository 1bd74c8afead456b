"""sensor_msgs/JointState -> joint trajectory chunks of numeric arrays.

Chunks are downsampled shape-preservingly (joint_simplify.py): at most ``joint_max_samples``
samples, within ``joint_tolerance_rad`` of every raw sample of every joint (or, when the
signal is noisier than that, the smallest doubled tolerance that fits, stored as
``tolerance_rad``), each joint's minimum and maximum kept exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..config import BridgeConfig, TopicRule
from ..joint_simplify import simplify_joints
from ..messages import RosMessage
from .base import ChunkedConverter, EpisodeContext, Record, base_metadata

__all__ = ["JointTrajectoryConverter"]


@dataclass
class _Buffer:
    names: list[str]
    t: list[int] = field(default_factory=list)
    positions: list[list[float]] = field(default_factory=list)
    velocities: list[list[float]] = field(default_factory=list)
    efforts: list[list[float]] = field(default_factory=list)
    #: where the robot was at the buffer's latest sample (robot_pose.py), if known
    spatial: dict[str, Any] | None = None


class JointTrajectoryConverter(ChunkedConverter[_Buffer]):
    motion_aware = True
    embed_descriptions = False  # templated numbers: full text, filters and space find it

    def __init__(self, topic: str, msgtype: str, rule: TopicRule, config: BridgeConfig) -> None:
        super().__init__(topic, msgtype, rule, config, "joint_trajectory")
        self._anchor: list[float] | None = None
        self._chunks = 0

    def _read(self, msg: RosMessage) -> tuple[list[str], list[float], list[float], list[float]]:
        data = msg.data
        names = data["name"]
        positions = [float(v) for v in data["position"]]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise TypeError("JointState.name must be a list of strings")
        if len(positions) != len(names):
            raise ValueError(f"JointState has {len(names)} names but {len(positions)} positions")
        velocities = [float(v) for v in data.get("velocity") or []]
        efforts = [float(v) for v in data.get("effort") or []]
        for label, values in (("velocity", velocities), ("effort", efforts)):
            if values and len(values) != len(names):
                raise ValueError(f"JointState has {len(names)} names but {len(values)} {label} values")
        return names, positions, velocities, efforts

    def feed(self, msg: RosMessage) -> bool:
        names, positions, velocities, efforts = self._read(msg)
        buffer = self._buffer
        if buffer is None or buffer.names != names:
            buffer = self._start_buffer(names, msg.t_ns)
        buffer.t.append(msg.t_ns)
        buffer.positions.append(positions)
        buffer.velocities.append(velocities)
        buffer.efforts.append(efforts)
        if self.robot_pose is not None:
            buffer.spatial = self.robot_pose(msg.t_ns) or buffer.spatial
        if self._spans_chunk(msg.t_ns):
            self.ready = True
        return self._moved(positions)

    def check(self, msg: RosMessage) -> None:
        self._read(msg)

    def would_move(self, msg: RosMessage) -> bool:
        positions = self._read(msg)[1]
        anchor = self._anchor
        if anchor is None or len(anchor) != len(positions):  # nothing to move from yet: this is it (base.py)
            self._anchor = positions
            return False
        return self._distance(anchor, positions) > self.config.motion_threshold_rad

    @staticmethod
    def _distance(a: list[float], b: list[float]) -> float:
        return max((abs(p - q) for p, q in zip(a, b)), default=0.0)

    def _moved(self, positions: list[float]) -> bool:
        anchor = self._anchor
        still = anchor is not None and len(anchor) == len(positions) and (
            self._distance(anchor, positions) <= self.config.motion_threshold_rad
        )
        if still:
            return False
        self._anchor = positions
        return anchor is not None

    def _start_buffer(self, names: list[str], t_ns: int) -> _Buffer:
        """A change in the joint set closes the chunk (arrays need a fixed column set)."""
        return self._begin_chunk(_Buffer(list(names)), t_ns)

    def _chunk_record(self, episode: EpisodeContext, buffer: _Buffer) -> Record:
        t = np.asarray(buffer.t, dtype=np.int64)
        positions = np.asarray(buffer.positions, dtype=np.float64).reshape(len(t), len(buffer.names))
        seconds = (t - episode.start_ns) / 1e9
        rows, tolerance = simplify_joints(seconds, positions, self.config.joint_tolerance_rad,
                                          self.config.joint_max_samples)
        data: dict[str, Any] = {
            "t0_ns": episode.start_ns,
            "t": seconds[rows].tolist(),
            "names": buffer.names,
            "positions": positions[rows].tolist(),
            "velocities": _full_rows(buffer.velocities, rows, len(buffer.names)),
            "efforts": _full_rows(buffer.efforts, rows, len(buffer.names)),
            "raw_samples": len(t),
            # linear interpolation between the stored samples is within this of every raw one
            "tolerance_rad": tolerance,
        }
        travel = positions.max(axis=0) - positions.min(axis=0) if len(t) else np.zeros(len(buffer.names))
        duration_s = float(t.max() - t.min()) / 1e9
        metadata = base_metadata(episode, self.topic, self.msgtype, duration_s)
        metadata["episode"].update({"t_start_ns": int(t.min()), "t_end_ns": int(t.max())})
        self._gap_section(metadata, int(t.min()), int(t.max()))
        metadata["robot"] = {**metadata.get("robot", {}), "joints": buffer.names}
        metadata["params"] = {"joint_travel": {n: round(float(v), 4) for n, v in zip(buffer.names, travel)}}
        if buffer.spatial is not None:
            metadata["spatial"] = buffer.spatial
        self._chunks += 1
        return self._record(episode, _describe(self.topic, duration_s, buffer.names, travel), data, metadata,
                            min(buffer.t))

    def start_episode(self) -> None:
        self._chunks = 0

    def episode_summary(self) -> dict[str, Any] | None:
        return {"topic": self.topic, "msgtype": self.msgtype, "records": self._chunks} if self._chunks else None


def _full_rows(rows: list[list[float]], index: np.ndarray, width: int) -> list[list[float]]:
    """Velocities/efforts only when every sample has them (they are optional in JointState)."""
    if not rows or any(len(r) != width for r in rows):
        return []
    full: list[list[float]] = np.asarray(rows, dtype=np.float64)[index].tolist()
    return full


def _describe(topic: str, duration_s: float, names: list[str], travel: np.ndarray) -> str:
    shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
    text = f"joint trajectory {topic} {duration_s:.1f} s {len(names)} joints ({shown})"
    if len(names):
        most = int(np.argmax(travel))
        text += f" largest motion {names[most]} {float(travel[most]):.2f}"
    return text
