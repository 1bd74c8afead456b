"""Offline replay of ROS recordings into robotmem (``robotmem replay``). See docs/replay.md.

The names below load on first use, so registering the ``replay`` command (which imports
``bridges.replay.cli``) does not import the readers and the pipeline.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .readers import (
        McapFileReader,
        RecordingError,
        RecordingReader,
        RosbagsReader,
        TopicInfo,
        open_reader,
    )
    from .replay import RecordingResult, ReplayOptions, replay_paths, replay_recording

__all__ = [
    "McapFileReader",
    "RecordingError",
    "RecordingReader",
    "RecordingResult",
    "ReplayOptions",
    "RosbagsReader",
    "TopicInfo",
    "open_reader",
    "replay_paths",
    "replay_recording",
]

_HOMES = {name: ".replay" for name in ("RecordingResult", "ReplayOptions", "replay_paths", "replay_recording")}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES.get(name, ".readers"), __name__), name)
