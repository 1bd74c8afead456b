"""Offline replay of ROS recordings into robotmem (``robotmem replay``). See docs/replay.md."""

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
