"""Pose streams (Odometry, PoseStamped, PoseWithCovarianceStamped, Pose) -> trajectory chunks.

``feed`` only appends eight floats to Python lists (it runs once per message, tens of
thousands of times a second in replay); everything else happens per chunk with numpy:
track splitting (see tracks.py), path length from the raw points, then RDP downsampling
of what is stored.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..config import BridgeConfig, TopicRule
from ..gaps import Gap
from ..geometry import bbox, check_position, rdp_mask, representative_point, yaw_from_quaternions
from ..messages import RosMessage
from ..tracks import PathVerdict, TrackPiece, TrackSplitter, judge_tracks, pieces_of
from .base import ChunkedConverter, EpisodeContext, Record, base_metadata

__all__ = ["PoseTrajectoryConverter", "pose_extractor"]

PoseParts = tuple[dict[str, Any], dict[str, Any], str]

# Where the geometry_msgs/Pose sits inside each supported message type.
_POSE_PATHS: dict[str, tuple[str, ...]] = {
    "nav_msgs/msg/Odometry": ("pose", "pose"),
    "geometry_msgs/msg/PoseWithCovarianceStamped": ("pose", "pose"),
    "geometry_msgs/msg/PoseStamped": ("pose",),
    "geometry_msgs/msg/Pose": (),
}


def pose_extractor(msgtype: str) -> Callable[[dict[str, Any]], PoseParts]:
    """A function data -> (position, orientation, frame_id) for this message type."""
    path = _POSE_PATHS.get(msgtype)

    def extract(data: dict[str, Any]) -> PoseParts:
        pose = data
        for key in path if path is not None else _discover(data):
            pose = pose[key]
        header = data.get("header")
        frame = header.get("frame_id", "") if isinstance(header, dict) else ""
        return pose["position"], pose["orientation"], frame

    return extract


def _discover(data: dict[str, Any]) -> tuple[str, ...]:
    """For unknown types: follow "pose" keys until a dict with "position"."""
    keys: list[str] = []
    node = data
    while isinstance(node, dict) and "position" not in node and "pose" in node:
        keys.append("pose")
        node = node["pose"]
    return tuple(keys)


@dataclass
class _Buffer:
    """Raw points of one chunk in one frame."""

    frame_id: str
    #: the tf frame pair the points were composed from ("map->base_link"), kept with the chunk:
    #: the converter's current pair may have changed by the time the chunk is written
    tf_pair: str | None = None
    t: list[int] = field(default_factory=list)
    x: list[float] = field(default_factory=list)
    y: list[float] = field(default_factory=list)
    z: list[float] = field(default_factory=list)
    qx: list[float] = field(default_factory=list)
    qy: list[float] = field(default_factory=list)
    qz: list[float] = field(default_factory=list)
    qw: list[float] = field(default_factory=list)


class PoseTrajectoryConverter(ChunkedConverter[_Buffer]):
    motion_aware = True
    embed_descriptions = False  # templated numbers: full text, filters and space find it

    def __init__(self, topic: str, msgtype: str, rule: TopicRule, config: BridgeConfig) -> None:
        super().__init__(topic, msgtype, rule, config, "pose_trajectory")
        self._extract = pose_extractor(msgtype)
        self._anchor: tuple[float, float, float] | None = None
        #: the frame of ``_anchor``: a position in another frame is no motion from it
        self._anchor_frame = ""
        self._motion_sq = config.motion_threshold_m**2
        #: time of the last pose before the buffer being split (the step into its first pose)
        self._prev_ns: int | None = None
        self._chunk_from_ns = 0
        self.start_episode()

    # -- per message -------------------------------------------------------------------
    def _read(self, msg: RosMessage) -> tuple[float, float, float, float, float, float, float, str]:
        position, orientation, frame = self._extract(msg.data)
        x, y, z = float(position["x"]), float(position["y"]), float(position["z"])
        qx, qy = float(orientation["x"]), float(orientation["y"])
        qz, qw = float(orientation["z"]), float(orientation["w"])
        check_position(x, y, z)
        if not math.isfinite(qx + qy + qz + qw):
            raise ValueError("pose has a non-finite orientation")
        return x, y, z, qx, qy, qz, qw, frame

    def feed(self, msg: RosMessage) -> bool:
        return self._feed_pose(msg.t_ns, *self._read(msg))

    def _feed_pose(self, t_ns: int, x: float, y: float, z: float, qx: float, qy: float, qz: float, qw: float,
                   frame: str, tf_pair: str | None = None) -> bool:
        if self.pose_sink is not None:
            self.pose_sink(t_ns, x, y, z, frame, self.topic)
        buffer = self._buffer
        if buffer is None or buffer.frame_id != frame or buffer.tf_pair != tf_pair:
            buffer = self._start_buffer(frame, t_ns, tf_pair)
        buffer.t.append(t_ns)
        buffer.x.append(x)
        buffer.y.append(y)
        buffer.z.append(z)
        buffer.qx.append(qx)
        buffer.qy.append(qy)
        buffer.qz.append(qz)
        buffer.qw.append(qw)
        if self._spans_chunk(t_ns):
            self.ready = True
        return self._moved(x, y, z, frame)

    def check(self, msg: RosMessage) -> None:
        self._read(msg)

    def would_move(self, msg: RosMessage) -> bool:
        x, y, z, *_, frame = self._read(msg)
        return self._would_move_to(x, y, z, frame)

    def _would_move_to(self, x: float, y: float, z: float, frame: str) -> bool:
        anchor = self._anchor
        if anchor is None or frame != self._anchor_frame:
            # No position to move from yet (base.py), or one in another frame (the tf pair went
            # from odom to map as localisation started): this one is it.
            self._anchor, self._anchor_frame = (x, y, z), frame
            return False
        return (x - anchor[0]) ** 2 + (y - anchor[1]) ** 2 + (z - anchor[2]) ** 2 > self._motion_sq

    def _moved(self, x: float, y: float, z: float, frame: str) -> bool:
        anchor = self._anchor
        if anchor is not None and (x - anchor[0]) ** 2 + (y - anchor[1]) ** 2 + (z - anchor[2]) ** 2 <= self._motion_sq:
            return False
        self._anchor, self._anchor_frame = (x, y, z), frame
        return anchor is not None

    def _start_buffer(self, frame: str, t_ns: int, tf_pair: str | None) -> _Buffer:
        """A frame (or tf pair) change closes the current chunk: a chunk never mixes frames."""
        return self._begin_chunk(_Buffer(frame, tf_pair), t_ns)

    # -- per chunk ---------------------------------------------------------------------

    def discard(self) -> None:
        # An already-stored episode: keep the track state consistent, write nothing.
        for buffer in self._pending_chunks():
            self._split(buffer)
        self.drain_buffers()

    def _split(self, buffer: _Buffer) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.int64], NDArray[np.float64]]:
        t = np.asarray(buffer.t, dtype=np.int64)
        xyz = np.column_stack([buffer.x, buffer.y, buffer.z]).astype(np.float64)
        ids, steps = self._splitter.assign(t, xyz, buffer.frame_id)
        prev = np.concatenate([[self._prev_ns if self._prev_ns is not None else t[0]], t[:-1]])
        self._prev_ns = int(t[-1])
        for gap in self.gaps:  # the straight line across a gap is not travelled path
            steps[(prev < gap.end_ns) & (t > gap.start_ns)] = 0.0
        self._chunk_from_ns = int(prev[0])
        self._messages += len(t)
        for piece in pieces_of(ids, t, steps):
            self._add_piece(piece)
        return t, xyz, ids, steps

    def _chunk_record(self, episode: EpisodeContext, buffer: _Buffer) -> Record:
        t, xyz, ids, steps = self._split(buffer)
        metadata = base_metadata(episode, self.topic, self.msgtype, float(t.max() - t.min()) / 1e9)
        verdict = _with_gaps(judge_tracks(pieces_of(ids, t, steps), self.topic),
                             self._gap_section(metadata, self._chunk_from_ns, int(t.max())), self.topic)
        keep = self._downsample(xyz, ids)
        yaw = yaw_from_quaternions(*(np.asarray(q, dtype=np.float64) for q in (buffer.qx, buffer.qy, buffer.qz, buffer.qw)))
        kept_t = (t[keep] - episode.start_ns) / 1e9
        data: dict[str, Any] = {
            "t0_ns": episode.start_ns,
            "t": kept_t.tolist(),
            "x": xyz[keep, 0].tolist(),
            "y": xyz[keep, 1].tolist(),
            "z": xyz[keep, 2].tolist(),
            "yaw": yaw[keep].tolist(),
            "frame_id": buffer.frame_id,
            "raw_points": len(t),
        }
        if len(np.unique(ids)) > 1:
            data["track"] = ids[keep].tolist()
        primary = ids == verdict.primary_track
        self._kept.append((t[keep], xyz[keep], ids[keep]))
        duration_s = float(t.max() - t.min()) / 1e9
        metadata["episode"].update({"t_start_ns": int(t.min()), "t_end_ns": int(t.max())})
        if buffer.tf_pair is not None:
            metadata["source"]["tf"] = buffer.tf_pair
        metadata["spatial"] = _spatial(xyz[primary], verdict, buffer.frame_id)
        description = _describe("pose trajectory", self.topic, duration_s, verdict, xyz[primary], buffer.frame_id)
        return self._record(episode, description, data, metadata, int(t.min()))

    def _downsample(self, xyz: NDArray[np.float64], ids: NDArray[np.int64]) -> NDArray[np.bool_]:
        """RDP per track (downsampling across two interleaved tracks would keep noise)."""
        keep = np.zeros(len(xyz), dtype=bool)
        for ident in np.unique(ids):
            where = np.flatnonzero(ids == ident)
            keep[where[rdp_mask(xyz[where], self.config.rdp_tolerance_m)]] = True
        return keep

    # -- per episode -------------------------------------------------------------------
    def start_episode(self) -> None:
        self._splitter = TrackSplitter(self.config.max_speed_mps, self.config.jump_tolerance_m)
        self._pieces: dict[int, TrackPiece] = {}
        self._kept: list[tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.int64]]] = []
        self._messages = 0
        self._prev_ns = None
        self._chunk_from_ns = 0

    def _add_piece(self, piece: TrackPiece) -> None:
        old = self._pieces.get(piece.ident)
        if old is not None:
            piece = TrackPiece(
                piece.ident,
                old.points + piece.points,
                min(old.first_t_ns, piece.first_t_ns),
                max(old.last_t_ns, piece.last_t_ns),
                old.length_m + piece.length_m,
            )
        self._pieces[piece.ident] = piece

    def episode_summary(self) -> dict[str, Any] | None:
        if not self._messages:
            return None
        verdict = _with_gaps(judge_tracks(list(self._pieces.values()), self.topic), self.gaps, self.topic)
        summary: dict[str, Any] = {"topic": self.topic, "msgtype": self.msgtype, "points": self._messages}
        if self._kept:
            t = np.concatenate([k[0] for k in self._kept])
            xyz = np.concatenate([k[1] for k in self._kept])
            ids = np.concatenate([k[2] for k in self._kept])
            primary = xyz[ids == verdict.primary_track]
            order = np.argsort(t[ids == verdict.primary_track], kind="stable")
            frames = sorted({track.frame_id for track in self._splitter.tracks})
            summary["spatial"] = _spatial(primary[order], verdict, frames[0] if len(frames) == 1 else ",".join(frames))
            summary["duration_s"] = float(t.max() - t.min()) / 1e9
        summary["verdict"] = verdict
        return summary


def _with_gaps(verdict: PathVerdict, gaps: list[Gap], topic: str) -> PathVerdict:
    """Path quality "gaps" when data is missing (a worse verdict, such as interleaved, stays)."""
    if not gaps or verdict.quality not in ("ok", "outliers_removed"):
        return verdict
    missing = sum(g.seconds for g in gaps)
    note = f"{topic}: {len(gaps)} gap(s), {missing:.1f} s without data, left out of the path length"
    return dataclasses.replace(verdict, quality="gaps", note=f"{verdict.note}; {note}" if verdict.note else note)


def _spatial(points: NDArray[np.float64], verdict: PathVerdict, frame_id: str) -> dict[str, Any]:
    """The spatial context section of a trajectory record (points: the primary track, in time order)."""
    spatial: dict[str, Any] = {
        "position": [round(v, 4) for v in representative_point(points).tolist()],
        "start_position": [round(v, 4) for v in points[0].tolist()],
        "end_position": [round(v, 4) for v in points[-1].tolist()],
        "bbox": [[round(v, 4) for v in corner] for corner in bbox(points)],
        "frame": frame_id,
        "path_quality": verdict.quality,
    }
    if verdict.path_length_m is not None:
        spatial["path_length_m"] = round(verdict.path_length_m, 4)
    if verdict.note:
        spatial["path_note"] = verdict.note
    if len(verdict.tracks) > 1:
        spatial["tracks"] = verdict.tracks
    return spatial


def _describe(
    what: str, topic: str, duration_s: float, verdict: PathVerdict, points: NDArray[np.float64], frame_id: str
) -> str:
    start, end = points[0], points[-1]
    where = f"from ({start[0]:.2f}, {start[1]:.2f}) to ({end[0]:.2f}, {end[1]:.2f})"
    frame = f" in frame {frame_id}" if frame_id else ""
    if verdict.path_length_m is None:
        length = f"{len(verdict.tracks)} interleaved pose tracks (path length not reported)"
    else:
        length = f"{verdict.path_length_m:.1f} m"
    return f"{what} {topic} {duration_s:.1f} s {length} {where}{frame}"

