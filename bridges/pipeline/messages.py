"""The one shape every ROS message takes inside the pipeline.

Replay (rosbags / mcap decoded objects) and the rosbridge client (JSON) both normalise
their messages to :class:`RosMessage`, so the converters, the episode builder and the
writer never know where a message came from.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

__all__ = ["RosMessage", "header_stamp_ns", "message_time_ns", "normalize_msgtype", "to_plain"]

_MSGTYPE = re.compile(r"([A-Za-z][\w]*)/(?:(msg)/)?([A-Za-z][\w]*)")


@dataclass(frozen=True)
class RosMessage:
    """One message: topic, normalised type, integer-nanosecond time and the message as plain data."""

    topic: str
    #: normalised "pkg/msg/Type"
    msgtype: str
    #: header stamp when present and non-zero, else the log / receive time
    t_ns: int
    #: field names as in the .msg; times as {"sec", "nanosec"}; uint8[] as bytes
    data: dict[str, Any]
    #: when it reached the bridge (receive time, on the message clock) or the recorder (log
    #: time); None: unknown. A frame stamped before an episode's end that arrives after the
    #: late_grace_s window must not go into it, and only its arrival tells (pipeline.py)
    arrived_ns: int | None = None


def normalize_msgtype(name: str) -> str:
    """``"nav_msgs/Odometry"`` and ``"nav_msgs/msg/Odometry"`` both become ``"nav_msgs/msg/Odometry"``.

    Raises ValueError for anything that is not a ROS message type name.
    """
    match = _MSGTYPE.fullmatch(name.strip()) if isinstance(name, str) else None
    if match is None:
        raise ValueError(f"not a ROS message type name: {name!r} (expected 'pkg/msg/Type' or 'pkg/Type')")
    return f"{match.group(1)}/msg/{match.group(3)}"


def to_plain(msg_object: Any) -> Any:
    """Decoded message objects (rosbags dataclasses, mcap-ros2 objects) or rosbridge JSON -> plain data.

    Nested messages become dicts keyed by field name, arrays become lists (uint8/int8
    arrays become ``bytes``), ROS 1 times ``{"secs", "nsecs"}`` become ``{"sec", "nanosec"}``.
    """
    return _plain(msg_object)


def _plain(value: Any) -> Any:
    compiled = _COMPILED.get(type(value))
    if compiled is not None:
        return compiled(value)
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, np.ndarray):
        return _array(value)
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return _plain_dict(value)
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, np.generic):
        return value.item()
    fields = _field_names(type(value))
    if fields is None:
        raise TypeError(f"cannot convert {type(value).__name__} to plain message data")
    converter = _COMPILED[type(value)] = _compile(fields, value)
    return converter(value)


def _array(value: np.ndarray) -> Any:
    if value.dtype == np.uint8 or value.dtype == np.int8:
        return value.tobytes()
    return value.tolist()


def _plain_dict(value: dict[Any, Any]) -> dict[str, Any]:
    if len(value) == 2 and "secs" in value and "nsecs" in value:
        return {"sec": value["secs"], "nanosec": value["nsecs"]}
    return {str(key): _plain(item) for key, item in value.items()}


#: decoded message class -> generated function object -> dict (replay converts every message)
_COMPILED: dict[type, Callable[[Any], dict[str, Any]]] = {}
_PRIMITIVES = (bool, int, float, str)


def _compile(fields: tuple[str, ...], sample: Any) -> Callable[[Any], dict[str, Any]]:
    """Generate ``lambda o: {"a": o.a, "b": _plain(o.b), ...}`` for one message class.

    A generated function is about three times faster than walking fields generically. The
    field kinds come from a sample instance; primitives are copied as they are, anything
    else goes through ``_plain`` (so an unexpected value still converts correctly).
    """
    parts = []
    for name in fields:
        if not name.isidentifier() or keyword.iskeyword(name):
            return lambda obj: {n: _plain(getattr(obj, n)) for n in fields}
        value = getattr(sample, name)
        if type(value) in _PRIMITIVES:
            parts.append(f"{name!r}: o.{name}")
        elif isinstance(value, np.ndarray):
            parts.append(f"{name!r}: _array(o.{name})")
        else:
            parts.append(f"{name!r}: _plain(o.{name})")
    namespace: dict[str, Any] = {"_plain": _plain, "_array": _array}
    exec("def convert(o):\n    return {" + ", ".join(parts) + "}", namespace)  # noqa: S102 - names checked above
    return cast(Callable[[Any], dict[str, Any]], namespace["convert"])


_FIELD_CACHE: dict[type, tuple[str, ...] | None] = {}


def _field_names(cls: type) -> tuple[str, ...] | None:
    """Message field names of a decoded class (dataclass fields or __slots__)."""
    try:
        return _FIELD_CACHE[cls]
    except KeyError:
        pass
    names: tuple[str, ...] | None = None
    dataclass_fields = getattr(cls, "__dataclass_fields__", None)
    if dataclass_fields is not None:
        names = tuple(name for name in dataclass_fields if not name.startswith("__"))
    else:
        slots = getattr(cls, "__slots__", None)
        if slots:
            names = tuple(name for name in slots if not name.startswith("_"))
    _FIELD_CACHE[cls] = names
    return names


def header_stamp_ns(data: dict[str, Any]) -> int:
    """The header stamp in nanoseconds, or 0 when the message has none."""
    header = data.get("header")
    if not isinstance(header, dict):
        return 0
    stamp = header.get("stamp")
    if not isinstance(stamp, dict):
        return 0
    sec: Any = stamp.get("sec", stamp.get("secs", 0))
    nanosec: Any = stamp.get("nanosec", stamp.get("nsecs", 0))
    try:
        return int(sec) * 1_000_000_000 + int(nanosec)
    except (TypeError, ValueError):
        return 0


def message_time_ns(data: dict[str, Any], fallback_ns: int) -> int:
    """The contract's message time: the header stamp when present and non-zero, else ``fallback_ns``."""
    stamp = header_stamp_ns(data)
    return stamp if stamp > 0 else int(fallback_ns)
