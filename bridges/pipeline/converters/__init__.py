"""Converters: one per kind of stream; ``make_converter`` picks by rule."""

from __future__ import annotations

from ..config import BridgeConfig, TopicRule
from .base import (
    Converter,
    EpisodeContext,
    PerMessageConverter,
    Record,
    base_metadata,
    occurred_at,
    record_metadata,
)
from .image import ImageConverter
from .joints import JointTrajectoryConverter
from .json_perception import JsonPerceptionConverter
from .laser import LaserScanConverter
from .navsat import NavSatTrackConverter
from .pose import PoseTrajectoryConverter
from .tf import TfTrajectoryConverter

__all__ = [
    "DATA_CONVERTERS",
    "Converter",
    "EpisodeContext",
    "PerMessageConverter",
    "Record",
    "base_metadata",
    "make_converter",
    "occurred_at",
    "record_metadata",
]

DATA_CONVERTERS: dict[str, type[Converter]] = {
    "pose_trajectory": PoseTrajectoryConverter,
    "tf_trajectory": TfTrajectoryConverter,
    "navsat_track": NavSatTrackConverter,
    "joint_trajectory": JointTrajectoryConverter,
    "image": ImageConverter,
    "laser_scan": LaserScanConverter,
    "json_perception": JsonPerceptionConverter,
}


def make_converter(topic: str, msgtype: str, rule: TopicRule, config: BridgeConfig) -> Converter:
    """The converter for a data rule ("learn" and "episode" are handled by the pipeline itself)."""
    cls = DATA_CONVERTERS[rule.converter]
    return cls(topic, msgtype, rule, config)  # type: ignore[call-arg]
