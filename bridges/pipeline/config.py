"""The bridge/replay configuration: which topics become which records, and the tunables.

The same file (``bridge.toml``) drives the live rosbridge client and offline replay::

    chunk_seconds = 10.0          # trajectory chunk length
    rdp_tolerance_m = 0.02        # Ramer-Douglas-Peucker tolerance for stored pose paths
    idle_gap_s = 30.0             # no motion for this long ends an episode (when the policy uses it)
    max_episode_s = 1800.0
    late_grace_s = 2.0            # an ended episode still takes messages stamped before its end this long
    default_topics = true         # keep the built-in rules; [[topics]] entries override them per topic

    [[topics]]
    topic = "/odom"
    msgtype = "nav_msgs/msg/Odometry"   # optional; omitted = whatever type the topic has
    converter = "pose_trajectory"
    sample_every_s = 0.0

``topic = "*"`` with a ``msgtype`` matches every topic of that type.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridges import BRIDGE_CONFIG_NAME
from robotmem import PERCEPTION_TYPES
from robotmem.errors import ConfigError

from .messages import normalize_msgtype

__all__ = [
    "BRIDGE_CONFIG_NAME",
    "CONVERTERS",
    "DEFAULT_TOPICS",
    "PERCEPTION_TYPES",
    "WILDCARD",
    "BridgeConfig",
    "TopicRule",
    "default_bridge_config_path",
    "load_bridge_config",
    "parse_bridge_config",
    "replace_topics",
]

WILDCARD = "*"

#: the file ``robotmem bridge`` and ``robotmem replay`` read from ROBOTMEM_HOME without --config


#: converters that store no perception, so a perception_type means nothing for them
_NO_PERCEPTION = frozenset({"learn", "episode"})

#: every converter name a rule may use
CONVERTERS = frozenset(
    {"pose_trajectory", "tf_trajectory", "navsat_track", "joint_trajectory", "image", "laser_scan", "learn", "episode", "json_perception"}
)


@dataclass(frozen=True)
class TopicRule:
    """How one topic (or, with ``topic="*"``, every topic of ``msgtype``) is turned into records."""

    topic: str
    #: None: accept whatever type the topic has, if a converter exists
    msgtype: str | None
    converter: str
    #: passed to rosbridge subscribe (throttle_rate)
    throttle_rate_ms: int = 0
    #: passed to rosbridge subscribe
    queue_length: int = 0
    #: keep at most one message per interval (applied by the pipeline); 0 keeps all
    sample_every_s: float = 0.0
    #: overrides the converter's default perception type
    perception_type: str | None = None

    def matches(self, topic: str, msgtype: str | None) -> bool:
        if self.topic != WILDCARD and self.topic != topic:
            return False
        if self.topic == WILDCARD:
            return msgtype is not None and msgtype == self.msgtype
        return self.msgtype is None or msgtype is None or msgtype == self.msgtype


def _image_rule(msgtype: str) -> TopicRule:
    return TopicRule(WILDCARD, msgtype, "image", throttle_rate_ms=1000, queue_length=1, sample_every_s=1.0)


DEFAULT_TOPICS: tuple[TopicRule, ...] = (
    TopicRule("/odom", "nav_msgs/msg/Odometry", "pose_trajectory"),
    TopicRule("/amcl_pose", "geometry_msgs/msg/PoseWithCovarianceStamped", "pose_trajectory"),
    TopicRule("/pose", "geometry_msgs/msg/PoseStamped", "pose_trajectory"),
    TopicRule("/joint_states", "sensor_msgs/msg/JointState", "joint_trajectory"),
    TopicRule("/robotmem/learn", "std_msgs/msg/String", "learn"),
    TopicRule("/robotmem/episode", "std_msgs/msg/String", "episode"),
    TopicRule("/tf", "tf2_msgs/msg/TFMessage", "tf_trajectory"),
    TopicRule("/tf", "tf/msg/tfMessage", "tf_trajectory"),
    TopicRule("/tf_static", "tf2_msgs/msg/TFMessage", "tf_trajectory"),
    # By type: any topic carrying these types.
    TopicRule(WILDCARD, "nav_msgs/msg/Odometry", "pose_trajectory"),
    TopicRule(WILDCARD, "geometry_msgs/msg/PoseStamped", "pose_trajectory"),
    TopicRule(WILDCARD, "geometry_msgs/msg/PoseWithCovarianceStamped", "pose_trajectory"),
    TopicRule(WILDCARD, "sensor_msgs/msg/JointState", "joint_trajectory"),
    TopicRule(WILDCARD, "sensor_msgs/msg/NavSatFix", "navsat_track"),
    _image_rule("sensor_msgs/msg/Image"),
    _image_rule("sensor_msgs/msg/CompressedImage"),
    TopicRule(
        WILDCARD, "sensor_msgs/msg/LaserScan", "laser_scan", throttle_rate_ms=1000, queue_length=1, sample_every_s=1.0
    ),
)


@dataclass(frozen=True)
class BridgeConfig:
    """Every tunable of the ingestion pipeline. Build from a file with :func:`load_bridge_config`."""

    topics: tuple[TopicRule, ...] = DEFAULT_TOPICS
    #: trajectory chunk length (seconds of message time)
    chunk_seconds: float = 10.0
    #: Ramer-Douglas-Peucker tolerance for stored pose paths
    rdp_tolerance_m: float = 0.02
    #: no motion for this long ends an episode (policies that use idle detection)
    idle_gap_s: float = 30.0
    max_episode_s: float = 1800.0
    #: an ended episode is finished (last chunks, summary, end_session) only after this many
    #: seconds of message time, so that a message stamped before its end that arrives late
    #: (topics are independent streams) still lands in it; 0 finishes it at once
    late_grace_s: float = 2.0
    #: longest side of stored image thumbnails
    image_thumbnail_px: int = 64
    #: CompressedImage: 0 (default) stores metadata only (format, bytes, frame, width/height from
    #: the PNG/JPEG header); N > 0 also keeps frames of at most N compressed bytes as they are
    compressed_image_max_bytes: int = 0
    #: images, scans and joint chunks carry the episode's latest pose when it is at most this old (s)
    pose_max_age_s: float = 3.0
    #: a pose moving less than this is "no motion" (idle detection)
    motion_threshold_m: float = 0.05
    #: a joint moving less than this is "no motion"
    motion_threshold_rad: float = 0.02
    #: faster than this between consecutive poses is a jump, not motion (track splitting)
    max_speed_mps: float = 5.0
    #: slack added to max_speed_mps * dt (timestamps are often coarse)
    jump_tolerance_m: float = 0.5
    #: number of range bins in a laser scan summary
    laser_bins: int = 36
    #: json_perception: payloads larger than this (JSON bytes) keep only their field names
    json_max_bytes: int = 4096
    #: the frame pair /tf trajectories track, [parent, child]; empty: map -> base_link where the
    #: tree has it, else odom -> base_link / base_footprint (converters/tf.py)
    tf_frames: tuple[str, ...] = ()
    #: a topic quiet for more than gap_periods of its usual period, and at least gap_min_s, has a gap
    gap_min_s: float = 1.0
    gap_periods: float = 5.0
    #: joint chunks are downsampled to within this (radians) of the raw samples (joint_simplify.py)
    joint_tolerance_rad: float = 0.01
    #: at most this many samples per joint chunk (the tolerance grows when a noisy chunk needs more)
    joint_max_samples: int = 500

    def rules_for(self, topic: str, msgtype: str | None) -> tuple[TopicRule, ...]:
        """The rules for a topic: rules naming it (and its type) win; else rules matching its type.

        A rule naming the topic for another type does not hide the type's rule: the message's
        type decides how it is read (``/pose`` carrying PoseWithCovarianceStamped is a trajectory).
        """
        exact = tuple(r for r in self.topics if r.topic == topic and r.matches(topic, msgtype))
        if exact:
            return exact
        return tuple(r for r in self.topics if r.topic == WILDCARD and r.matches(topic, msgtype))

    def explicit_topics(self) -> tuple[TopicRule, ...]:
        """Rules that name a topic (what a live bridge subscribes to without discovery)."""
        return tuple(r for r in self.topics if r.topic != WILDCARD)


def default_bridge_config_path(home: Path) -> Path | None:
    """``HOME/bridge.toml`` when it exists (the config used when --config is not given)."""
    candidate = Path(home) / BRIDGE_CONFIG_NAME
    return candidate if candidate.exists() else None


def load_bridge_config(path: Path | None) -> BridgeConfig:
    """Read ``bridge.toml``; ``None`` gives the defaults. Raises ConfigError naming the bad key."""
    if path is None:
        return BridgeConfig()
    toml = _toml_module()
    try:
        raw = toml.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read bridge config {path}: {exc}") from exc
    except toml.TOMLDecodeError as exc:
        raise ConfigError(f"bridge config {path} is not valid TOML: {exc}") from exc
    return parse_bridge_config(raw, origin=str(path))


def _toml_module() -> Any:
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    try:
        import tomli
    except ImportError as exc:  # pragma: no cover - Python 3.10 without tomli
        raise ConfigError("reading bridge.toml needs Python 3.11+ or the 'tomli' package") from exc
    return tomli


_SCALARS = {f.name: f for f in dataclasses.fields(BridgeConfig) if f.name not in ("topics", "tf_frames")}
_RULE_FIELDS = {f.name: f for f in dataclasses.fields(TopicRule)}


def parse_bridge_config(raw: dict[str, Any], origin: str = "bridge config") -> BridgeConfig:
    """Validate an already-parsed TOML document."""
    allowed = set(_SCALARS) | {"topics", "default_topics", "tf_frames"}
    for key in raw:
        if key not in allowed:
            raise ConfigError(f"{origin}: unknown key {key!r} (known: {', '.join(sorted(allowed))})", field=key)
    values: dict[str, Any] = {name: _scalar(raw, name, origin) for name in _SCALARS if name in raw}
    if "tf_frames" in raw:
        values["tf_frames"] = _frame_pair(raw["tf_frames"], origin)
    keep_defaults = raw.get("default_topics", True)
    if not isinstance(keep_defaults, bool):
        raise ConfigError(f"{origin}: 'default_topics' must be true or false", field="default_topics")
    entries = raw.get("topics", [])
    if not isinstance(entries, list):
        raise ConfigError(f"{origin}: 'topics' must be an array of tables ([[topics]])", field="topics")
    rules = tuple(_rule(entry, i, origin) for i, entry in enumerate(entries))
    if keep_defaults:
        overridden = {(r.topic, r.msgtype if r.topic == WILDCARD else None) for r in rules}
        rules += tuple(
            r for r in DEFAULT_TOPICS if (r.topic, r.msgtype if r.topic == WILDCARD else None) not in overridden
        )
    return BridgeConfig(topics=rules, **values)


def _frame_pair(value: Any, origin: str) -> tuple[str, str]:
    if (not isinstance(value, list) or len(value) != 2
            or not all(isinstance(v, str) and v.strip("/") for v in value) or value[0] == value[1]):
        raise ConfigError(f"{origin}: 'tf_frames' must be two different frame names, [parent, child], "
                          f"e.g. [\"map\", \"base_link\"]; got {value!r}", field="tf_frames")
    return value[0].strip("/"), value[1].strip("/")


def _scalar(raw: dict[str, Any], name: str, origin: str) -> Any:
    value = raw[name]
    default = _SCALARS[name].default
    if isinstance(default, int) and not isinstance(default, bool):
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0:
        kind = "a non-negative integer" if isinstance(default, int) else "a non-negative number"
        raise ConfigError(f"{origin}: {name!r} must be {kind}, got {value!r}", field=name)
    if name in ("chunk_seconds", "image_thumbnail_px", "max_speed_mps", "laser_bins", "joint_max_samples") and (
        value == 0
    ):
        raise ConfigError(f"{origin}: {name!r} must be greater than zero", field=name)
    return float(value) if isinstance(default, float) else value


def _rule(entry: Any, index: int, origin: str) -> TopicRule:
    where = f"topics[{index}]"
    if not isinstance(entry, dict):
        raise ConfigError(f"{origin}: {where} must be a table", field=where)
    for key in entry:
        if key not in _RULE_FIELDS:
            raise ConfigError(f"{origin}: {where}: unknown key {key!r}", field=f"{where}.{key}")
    topic = entry.get("topic")
    if not isinstance(topic, str) or not (topic == WILDCARD or topic.startswith("/")):
        raise ConfigError(f"{origin}: {where}.topic must be a topic name starting with '/' or '*'", field=f"{where}.topic")
    converter = entry.get("converter")
    if converter not in CONVERTERS:
        raise ConfigError(
            f"{origin}: {where}.converter must be one of {', '.join(sorted(CONVERTERS))}, got {converter!r}",
            field=f"{where}.converter",
        )
    msgtype = entry.get("msgtype")
    if msgtype is not None:
        try:
            msgtype = normalize_msgtype(msgtype)
        except ValueError as exc:
            raise ConfigError(f"{origin}: {where}.msgtype: {exc}", field=f"{where}.msgtype") from exc
    elif topic == WILDCARD:
        raise ConfigError(f"{origin}: {where}: topic '*' needs a msgtype", field=f"{where}.msgtype")
    numbers: dict[str, Any] = {name: _rule_number(entry, name, where, origin)
                               for name in ("throttle_rate_ms", "queue_length", "sample_every_s") if name in entry}
    perception_type = _perception_type(entry, converter, where, origin)
    return TopicRule(topic=topic, msgtype=msgtype, converter=converter, perception_type=perception_type, **numbers)


def _rule_number(entry: dict[str, Any], name: str, where: str, origin: str) -> int | float:
    """throttle_rate_ms and queue_length: non-negative integers; sample_every_s: a finite number >= 0."""
    value = entry[name]
    integral = name != "sample_every_s"
    if integral:
        valid = isinstance(value, int) and not isinstance(value, bool)
        kind = "a non-negative integer"
    else:
        valid = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        kind = "a non-negative number of seconds"
    if not valid or value < 0:
        raise ConfigError(f"{origin}: {where}.{name} must be {kind}, got {value!r}", field=f"{where}.{name}")
    return int(value) if integral else float(value)


def _perception_type(entry: dict[str, Any], converter: str, where: str, origin: str) -> str | None:
    """One of robotmem's perception types, and only for converters that store perceptions."""
    value = entry.get("perception_type")
    if value is None:
        return None
    field = f"{where}.perception_type"
    if converter in _NO_PERCEPTION:
        raise ConfigError(f"{origin}: {field}: converter {converter!r} stores no perception", field=field)
    if value not in PERCEPTION_TYPES:
        raise ConfigError(f"{origin}: {field} must be one of {', '.join(PERCEPTION_TYPES)}, got {value!r}",
                          field=field)
    return str(value)


def replace_topics(config: BridgeConfig, topics: tuple[TopicRule, ...]) -> BridgeConfig:
    """A copy of ``config`` with other topic rules (used by replay's ``--topics``)."""
    return dataclasses.replace(config, topics=topics)


