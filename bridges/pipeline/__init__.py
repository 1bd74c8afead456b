"""The shared ingestion pipeline: ROS messages (from recordings or rosbridge) -> robotmem records.

See docs/replay.md for the records it writes and the rules it applies.
"""

from .config import DEFAULT_TOPICS, BridgeConfig, TopicRule, load_bridge_config
from .episodes import (
    EpisodePolicy,
    FileEpisodes,
    GapEpisodes,
    TopicEpisodes,
    parse_episode_split,
)
from .messages import RosMessage, normalize_msgtype, to_plain
from .outbox import RetryPolicy
from .pipeline import Pipeline
from .stats import PipelineStats, TopicStats

__all__ = [
    "DEFAULT_TOPICS",
    "BridgeConfig",
    "EpisodePolicy",
    "FileEpisodes",
    "GapEpisodes",
    "Pipeline",
    "PipelineStats",
    "RetryPolicy",
    "RosMessage",
    "TopicEpisodes",
    "TopicRule",
    "TopicStats",
    "load_bridge_config",
    "normalize_msgtype",
    "parse_episode_split",
    "to_plain",
]
