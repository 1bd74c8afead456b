"""rosbridge JSON -> :class:`bridges.pipeline.messages.RosMessage`.

rosbridge puts a message on the wire as plain JSON, close to the pipeline's shape
already; three things differ and are fixed here:

* ``uint8[]`` fields arrive as base64 strings (rosbridge's encoding for byte arrays);
  the pipeline wants ``bytes``. JSON carries no field types, so the fields are known by
  message type (:data:`BYTE_FIELDS`).
* ROS 1 times are ``{"secs", "nsecs"}``; the pipeline wants ``{"sec", "nanosec"}``.
* The message time is the header stamp when there is one and it is non-zero (simulators
  publish sim time there), otherwise the moment the bridge received the message —
  translated into the stamps' clock by :class:`MessageClock`, so that a stamp-less
  ``/robotmem/episode`` marker sorts correctly between Gazebo's sim-time odometry.
"""

from __future__ import annotations

import base64
import binascii
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bridges.pipeline.messages import (
    RosMessage,
    header_stamp_ns,
    message_time_ns,
    normalize_msgtype,
    to_plain,
)
from bridges.pipeline.stamps import WINDOW, running_offset

from .inbox import Received

__all__ = ["BYTE_FIELDS", "CLOCK_JUMP_NS", "CLOCK_JUMP_S", "MalformedMessage", "MessageClock", "has_stamp",
           "raw_stamp_ns", "to_ros_message"]

#: a stamp this far off the clock is a suspect (one bad stamp, or the clock jumping: a reset), and time
#: going back this far is a reset. Small: a training loop resets Gazebo every few seconds, and each
#: reset missed let every buffer grow and the camera fall behind its sampling slot. The transport's
#: jitter is milliseconds; stamps that lag more (amcl's, up to 5 s) only wait for the next message.
CLOCK_JUMP_S = 1.0
CLOCK_JUMP_NS = int(CLOCK_JUMP_S * 1e9)

#: ``uint8[]`` fields per normalised type (dotted paths from the message root).
BYTE_FIELDS: dict[str, tuple[str, ...]] = {
    "sensor_msgs/msg/Image": ("data",),
    "sensor_msgs/msg/CompressedImage": ("data",),
    "sensor_msgs/msg/PointCloud2": ("data",),
    "stereo_msgs/msg/DisparityImage": ("image.data",),
    "theora_image_transport/msg/Packet": ("data",),
}


class MalformedMessage(ValueError):
    """A message the bridge cannot use; the text says which field is wrong."""


class MessageClock:
    """Maps wall-clock receive times into the clock the robot stamps its headers with.

    The offset (receive time - header stamp) is the median of the last few stamped messages'
    (``stamps.WINDOW``): about the transport latency on a real robot, decades under a
    simulator that starts sim time at zero. One message with a bad stamp does not move it (the
    messages after it would have been placed off by as much, and the pipeline's stamp check,
    pipeline/stamps.py, measures stamps against it); a lasting change (a simulator restarted) is
    followed after a few messages. Messages without a stamp, and the "now" used for idle detection, are
    translated with it, so every time the pipeline sees is on one clock. Not thread-safe:
    the writer thread owns it.
    """

    def __init__(self) -> None:
        self.offset_ns = 0
        self.synced = False
        self._offsets: deque[int] = deque(maxlen=WINDOW)

    def observe(self, stamp_ns: int, receive_ns: int) -> None:
        self._offsets.append(receive_ns - stamp_ns)
        self.offset_ns = running_offset(self._offsets, self.offset_ns)
        self.synced = True

    def disagrees(self, stamp_ns: int, receive_ns: int) -> bool:
        """Whether a stamped message received at ``receive_ns`` is off the clock by more than
        ``CLOCK_JUMP_S``: a bad stamp, or the first sign of the clock jumping."""
        return abs(receive_ns - stamp_ns - self.offset_ns) > CLOCK_JUMP_NS

    def moved_from(self, offset_ns: int) -> bool:
        """Whether the offset has moved more than ``CLOCK_JUMP_S`` away from ``offset_ns``."""
        return abs(self.offset_ns - offset_ns) > CLOCK_JUMP_NS

    @contextmanager
    def as_it_was(self, offset_ns: int) -> Iterator[None]:
        """Translate with an earlier offset for a moment (messages stamped before the clock jumped)."""
        current, self.offset_ns = self.offset_ns, offset_ns
        try:
            yield
        finally:
            self.offset_ns = current

    def assume_wall_clock(self) -> None:
        """No stamped message came: the robot's clock is taken to be the wall clock."""
        self.offset_ns = 0
        self.synced = True

    def to_message_time(self, wall_ns: int) -> int:
        """``wall_ns`` on the robot's clock, never before 0: ROS time is unsigned. Right after a
        simulator restarts sim time at 0, a message that came faster than the clock's median
        latency would land a few milliseconds before 0, where robotmem refuses a record (the real
        server's reset test lost an episode's summary, placed at -0.0067 s)."""
        return max(0, wall_ns - self.offset_ns)


def raw_stamp_ns(item: Received) -> int:
    """The raw message's header stamp (0: none)."""
    return header_stamp_ns(item.raw) if isinstance(item.raw, dict) else 0


def has_stamp(item: Received) -> bool:
    """Whether the raw message carries a non-zero header stamp."""
    return raw_stamp_ns(item) > 0


def to_ros_message(item: Received, clock: MessageClock | None = None, *, observe: bool = True) -> RosMessage:
    """Convert one received rosbridge message; raises :class:`MalformedMessage` on bad input.

    ``observe=False``: the clock has already seen this message's stamp (the writer held it)."""
    try:
        msgtype = normalize_msgtype(item.msgtype)
    except ValueError as exc:
        raise MalformedMessage(f"{item.topic}: type: {exc}") from exc
    if not isinstance(item.raw, dict):
        raise MalformedMessage(f"{item.topic}: msg: expected a JSON object, got {type(item.raw).__name__}")
    data = dict(item.raw)
    for path in BYTE_FIELDS.get(msgtype, ()):
        _decode_bytes_field(data, path, item.topic)
    plain = to_plain(data)
    stamp_ns = header_stamp_ns(plain)
    # When it arrived, on the robot's clock as it stood before this message's own stamp moves
    # it: translated afterwards, a frame that arrives late would look on time (late_grace_s).
    arrived_ns = clock.to_message_time(item.receive_ns) if clock is not None and clock.synced else None
    if clock is not None and stamp_ns > 0 and observe:
        clock.observe(stamp_ns, item.receive_ns)
    fallback_ns = clock.to_message_time(item.receive_ns) if clock is not None else item.receive_ns
    return RosMessage(topic=item.topic, msgtype=msgtype, t_ns=message_time_ns(plain, fallback_ns), data=plain,
                      arrived_ns=fallback_ns if arrived_ns is None else arrived_ns)


def _decode_bytes_field(data: dict[str, Any], path: str, topic: str) -> None:
    """Replace the base64 string at ``path`` with bytes (copying the dicts on the way)."""
    *parents, leaf = path.split(".")
    node = data
    for key in parents:
        child = node.get(key)
        if not isinstance(child, dict):
            return
        node[key] = node = dict(child)
    value = node.get(leaf)
    if isinstance(value, str):
        try:
            node[leaf] = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise MalformedMessage(f"{topic}: {path}: not valid base64 ({exc})") from exc
    elif isinstance(value, list):
        # Some rosbridge builds send small byte arrays as lists of ints.
        try:
            node[leaf] = bytes(value)
        except (TypeError, ValueError) as exc:
            raise MalformedMessage(f"{topic}: {path}: not a byte array ({exc})") from exc
    elif value is not None and not isinstance(value, bytes):
        raise MalformedMessage(f"{topic}: {path}: expected base64 text, got {type(value).__name__}")
