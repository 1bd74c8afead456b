"""What every converter shares: the episode it writes into, the record shape, buffering."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from ..config import BridgeConfig, TopicRule
from ..gaps import Gap, gaps_overlapping
from ..messages import RosMessage

__all__ = [
    "PERCEPTION_TYPES",
    "Converter",
    "EpisodeContext",
    "PerMessageConverter",
    "Record",
    "base_metadata",
    "merged_under",
    "occurred_at",
    "record_metadata",
]

#: keyword arguments of Memory.save_perception
Record = dict[str, Any]

#: default perception type per converter (a rule's perception_type overrides it)
PERCEPTION_TYPES = {
    "pose_trajectory": "proprioceptive",
    "tf_trajectory": "proprioceptive",
    "navsat_track": "proprioceptive",
    "joint_trajectory": "proprioceptive",
    "image": "visual",
    "laser_scan": "visual",
    "json_perception": "proprioceptive",
    "episode_summary": "procedural",
}


@dataclass(frozen=True)
class EpisodeContext:
    """The episode (robotmem session) records are written into."""

    session_id: str
    start_ns: int
    collection: str
    robot_id: str | None
    #: {"file": path} for replay, {"url": ws://...} for the live bridge
    source: dict[str, str]
    #: the start marker's JSON context (task, robot, episode.*, ...): copied onto every record
    marker: dict[str, Any] = field(default_factory=dict)


def occurred_at(t_ns: int) -> float:
    """robotmem's ``occurred_at`` (epoch seconds) for a message time."""
    return t_ns / 1e9


def base_metadata(episode: EpisodeContext, topic: str, msgtype: str, duration_s: float) -> dict[str, Any]:
    """The context sections every record carries (robot, source, episode, task)."""
    metadata: dict[str, Any] = {
        "source": {"topic": topic, "msgtype": msgtype, **episode.source},
        "episode": {"key": episode.session_id},
        "task": {"duration_s": round(duration_s, 3)},
    }
    if episode.robot_id:
        metadata["robot"] = {"id": episode.robot_id}
    return metadata


def merged_under(base: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """``own`` laid over a copy of ``base``: nested objects merge key by key, ``own``'s values win."""
    result = copy.deepcopy(base)
    for key, value in own.items():
        below = result.get(key)
        result[key] = merged_under(below, value) if isinstance(value, dict) and isinstance(below, dict) else value
    return result


def record_metadata(episode: EpisodeContext, metadata: dict[str, Any]) -> dict[str, Any]:
    """A record's final metadata: its own sections over the episode's start-marker context.

    So ``recall(context_filter={"task.name": ...})`` finds every record of the episodes
    started for that task, not only their summaries.
    """
    return merged_under(episode.marker, metadata) if episode.marker else metadata


class Converter:
    """Turns the messages of one topic into records.

    ``feed`` validates and buffers one message and says whether the robot moved (used for
    idle detection); it raises KeyError/TypeError/ValueError for a malformed message, which
    the pipeline counts. ``drain`` turns the buffer into records for the open episode.
    """

    #: whether feed() reports motion (pose and joint streams do)
    motion_aware = False
    #: whether robotmem embeds the record descriptions. Templated numeric text ("pose
    #: trajectory /odom 10.0 s 4.6 m from ...") gains nothing from the semantic model and
    #: embedding it was most of a short replay's time; such records stay findable by full
    #: text, context filters and spatial_sort.
    embed_descriptions = True
    #: set by the pipeline on pose streams: called with (t_ns, x, y, z, frame_id, topic) per pose
    pose_sink: Callable[[int, float, float, float, str, str], None] | None = None
    #: set by the pipeline on other perceptions: the robot's ``spatial`` section at a time, or None
    robot_pose: Callable[[int], dict[str, Any] | None] | None = None

    def __init__(self, topic: str, msgtype: str, rule: TopicRule, config: BridgeConfig, kind: str) -> None:
        self.topic = topic
        self.msgtype = msgtype
        self.rule = rule
        self.config = config
        self.perception_type = rule.perception_type or PERCEPTION_TYPES[kind]
        self.chunk_ns = int(config.chunk_seconds * 1e9)
        #: True once the buffer spans a whole chunk (the pipeline then drains it)
        self.ready = False
        #: message time of the oldest buffered message (None: buffer empty)
        self.pending_since_ns: int | None = None
        #: message time of the newest buffered message (None: buffer empty or not measured yet)
        self.pending_until_ns: int | None = None
        #: the open episode's gaps that concern this topic (set by the pipeline; see gaps.py)
        self.gaps: list[Gap] = []

    def feed(self, msg: RosMessage) -> bool:
        raise NotImplementedError

    def _spans_chunk(self, t_ns: int) -> bool:
        """Whether the buffer, a message at ``t_ns`` now in it, spans a whole chunk (``spans``)."""
        since = t_ns if self.pending_since_ns is None else min(self.pending_since_ns, t_ns)
        until = t_ns if self.pending_until_ns is None else max(self.pending_until_ns, t_ns)
        self.pending_since_ns, self.pending_until_ns = since, until
        return self.spans(since, until)

    def spans(self, earliest_ns: int, latest_ns: int) -> bool:
        """Whether buffered messages from ``earliest_ns`` to ``latest_ns`` (or a buffer waiting
        since ``earliest_ns`` at time ``latest_ns``) make a whole chunk. Measured between the
        earliest and the latest, not the first and the last: stamps a little out of order (within
        stamps.OUTLIER_S) span the time they span, and a stamp a little ahead must not make the
        chunk wait for time to reach it again."""
        return latest_ns - earliest_ns >= self.chunk_ns

    def check(self, msg: RosMessage) -> None:
        """Raise as :meth:`feed` would for a malformed message, without buffering it (so that a
        bad message never opens an episode)."""
        raise NotImplementedError

    def would_move(self, msg: RosMessage) -> bool:
        """Whether this message shows motion, without buffering it (waiting for motion after an idle
        gap, or before the first episode of gap:SECONDS). The first position seen while waiting is
        the one motion is measured from: a robot that has not moved yet shows no motion."""
        return False

    def drain(self, episode: EpisodeContext) -> list[Record]:
        raise NotImplementedError

    def drain_ready(self, episode: EpisodeContext) -> list[Record]:
        """Records for what ``ready`` announced (the pipeline calls it after a message set ``ready``);
        ``drain`` takes everything (flush, episode end)."""
        return self.drain(episode)

    def discard(self) -> None:
        """Drop the buffer (an already-stored episode is being skipped)."""
        self.drain_buffers()

    def drain_buffers(self) -> None:
        raise NotImplementedError

    def start_episode(self) -> None:
        """Reset per-episode state (path tracks, counters)."""

    def episode_summary(self) -> dict[str, Any] | None:
        """What this topic contributes to the episode summary record (None: nothing)."""
        return None

    def _gap_section(self, metadata: dict[str, Any], start_ns: int, end_ns: int) -> list[Gap]:
        """Add ``gaps`` for the gaps in [start_ns, end_ns] to a chunk's metadata; returns them."""
        inside = gaps_overlapping(self.gaps, start_ns, end_ns)
        if inside:
            metadata["gaps"] = [g.as_dict() for g in inside]
        return inside

    def _record(self, episode: EpisodeContext, description: str, data: Any, metadata: dict[str, Any],
                t_ns: int) -> Record:
        """``t_ns``: when it happened (message time of the record's first message)."""
        return {
            "description": description,
            "perception_type": self.perception_type,
            "data": data,
            "metadata": record_metadata(episode, metadata),
            "collection": episode.collection,
            "session_id": episode.session_id,
            "embed": self.embed_descriptions,
            "occurred_at": occurred_at(t_ns),
        }


class _Samples(Protocol):
    t: list[int]


BufferT = TypeVar("BufferT", bound=_Samples)


class ChunkedConverter(Converter, Generic[BufferT]):
    """Buffers samples in chunks; every chunk becomes one record when drained."""

    def __init__(self, topic: str, msgtype: str, rule: TopicRule, config: BridgeConfig, kind: str) -> None:
        super().__init__(topic, msgtype, rule, config, kind)
        self._closed: list[BufferT] = []
        self._buffer: BufferT | None = None

    def _begin_chunk(self, buffer: BufferT, t_ns: int) -> BufferT:
        """Close the current chunk (if it has samples) and continue in ``buffer``."""
        if self._buffer is not None and self._buffer.t:
            self._closed.append(self._buffer)
            self.ready = True
        self._buffer = buffer
        if self.pending_since_ns is None:
            self.pending_since_ns = t_ns
        return buffer

    def _pending_chunks(self) -> list[BufferT]:
        return self._closed + ([self._buffer] if self._buffer is not None and self._buffer.t else [])

    def drain(self, episode: EpisodeContext) -> list[Record]:
        records = [self._chunk_record(episode, buffer) for buffer in self._pending_chunks()]
        self.drain_buffers()
        return records

    def drain_ready(self, episode: EpisodeContext) -> list[Record]:
        """The closed chunks, and the open one only once it spans a chunk.

        A frame change (odom -> map as localisation starts, a new joint set) closes a chunk and
        sets ``ready`` with the message that opened the next one. Draining everything then
        wrote that opening message alone, a "0.0 s 0.0 m" chunk, and the next chunk of the
        same frame started at the same point. It stays in the open chunk instead: the
        trajectory in the new frame is one chunk from its first pose, and no pose is dropped
        (a replay keeps every point the recording composes).
        """
        buffer = self._buffer
        if buffer is None or not buffer.t or self.spans(min(buffer.t), max(buffer.t)):
            return self.drain(episode)
        records = [self._chunk_record(episode, closed) for closed in self._closed]
        self._closed = []
        self.pending_since_ns, self.pending_until_ns = min(buffer.t), max(buffer.t)
        self.ready = False
        return records

    def drain_buffers(self) -> None:
        self._closed = []
        self._buffer = None
        self.pending_since_ns = self.pending_until_ns = None
        self.ready = False

    def _chunk_record(self, episode: EpisodeContext, buffer: BufferT) -> Record:
        raise NotImplementedError


class PerMessageConverter(Converter):
    """Converters that make one record per (sampled) message; records are written once per chunk."""

    def __init__(self, topic: str, msgtype: str, rule: TopicRule, config: BridgeConfig, kind: str) -> None:
        super().__init__(topic, msgtype, rule, config, kind)
        self._pending: list[tuple[int, str, Any, dict[str, Any]]] = []
        self._count = 0
        #: the message check() converted last, and its conversion
        self._checked: tuple[RosMessage, tuple[str, Any, dict[str, Any]]] | None = None

    def check(self, msg: RosMessage) -> None:
        self._checked = (msg, self.convert(msg))  # feed() reuses the conversion

    def feed(self, msg: RosMessage) -> bool:
        checked, self._checked = self._checked, None
        description, data, extra = checked[1] if checked is not None and checked[0] is msg else self.convert(msg)
        spatial = self.robot_pose(msg.t_ns) if self.robot_pose is not None else None
        if spatial is not None:
            extra = {**extra, "spatial": spatial}
        self._pending.append((msg.t_ns, description, data, extra))
        self._count += 1
        self.ready = self._spans_chunk(msg.t_ns)
        return False

    def convert(self, msg: RosMessage) -> tuple[str, Any, dict[str, Any]]:
        """(description, data, extra metadata sections) for one message; raises when malformed."""
        raise NotImplementedError

    def drain(self, episode: EpisodeContext) -> list[Record]:
        records = []
        for t_ns, description, data, extra in self._pending:
            metadata = base_metadata(episode, self.topic, self.msgtype, 0.0)
            metadata["episode"]["t_ns"] = t_ns
            for section, values in extra.items():
                metadata.setdefault(section, {}).update(values)
            records.append(self._record(episode, description, data, metadata, t_ns))
        self.drain_buffers()
        return records

    def drain_buffers(self) -> None:
        self._pending = []
        self.pending_since_ns = self.pending_until_ns = None
        self.ready = False

    def start_episode(self) -> None:
        self._count = 0

    def episode_summary(self) -> dict[str, Any] | None:
        return {"topic": self.topic, "msgtype": self.msgtype, "records": self._count}
