"""bridge.toml: default topic rules, overrides, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridges.pipeline import DEFAULT_TOPICS, BridgeConfig, load_bridge_config
from bridges.pipeline.config import PERCEPTION_TYPES
from robotmem.errors import ConfigError


def test_default_rules_map_known_topics_to_their_converters() -> None:
    config = BridgeConfig()
    assert config.topics == DEFAULT_TOPICS
    assert [r.converter for r in config.rules_for("/odom", "nav_msgs/msg/Odometry")] == ["pose_trajectory"]
    assert [r.converter for r in config.rules_for("/joint_states", "sensor_msgs/msg/JointState")] == ["joint_trajectory"]
    assert [r.converter for r in config.rules_for("/robotmem/learn", "std_msgs/msg/String")] == ["learn"]
    assert [r.converter for r in config.rules_for("/robotmem/episode", "std_msgs/msg/String")] == ["episode"]


def test_default_rules_match_any_topic_by_type() -> None:
    config = BridgeConfig()
    (image,) = config.rules_for("/front_camera/image_raw", "sensor_msgs/msg/Image")
    assert image.converter == "image" and image.sample_every_s == 1.0 and image.throttle_rate_ms == 1000
    (scan,) = config.rules_for("/lidar", "sensor_msgs/msg/LaserScan")
    assert scan.converter == "laser_scan"
    assert config.rules_for("/chatter", "std_msgs/msg/String") == ()


def test_a_topic_configured_for_another_type_gets_no_rule() -> None:
    assert BridgeConfig().rules_for("/odom", "std_msgs/msg/String") == ()


def test_a_config_file_overrides_one_topic_and_keeps_the_other_defaults(tmp_path: Path) -> None:
    path = tmp_path / "bridge.toml"
    path.write_text(
        'chunk_seconds = 5\nrdp_tolerance_m = 0.05\n\n[[topics]]\ntopic = "/odom"\nmsgtype = "nav_msgs/Odometry"\n'
        'converter = "pose_trajectory"\nsample_every_s = 0.5\n\n[[topics]]\ntopic = "/battery"\n'
        'converter = "json_perception"\nsample_every_s = 10\n',
        encoding="utf-8",
    )
    config = load_bridge_config(path)
    assert config.chunk_seconds == 5.0 and config.rdp_tolerance_m == 0.05
    (odom,) = config.rules_for("/odom", "nav_msgs/msg/Odometry")
    assert odom.sample_every_s == 0.5 and odom.msgtype == "nav_msgs/msg/Odometry"
    (battery,) = config.rules_for("/battery", "sensor_msgs/msg/BatteryState")
    assert battery.converter == "json_perception"
    assert config.rules_for("/joint_states", "sensor_msgs/msg/JointState")  # a default still present
    assert sum(1 for r in config.topics if r.topic == "/odom") == 1


def test_default_topics_false_keeps_only_the_files_rules(tmp_path: Path) -> None:
    path = tmp_path / "bridge.toml"
    path.write_text('default_topics = false\n[[topics]]\ntopic = "/odom"\nconverter = "pose_trajectory"\n')
    config = load_bridge_config(path)
    assert len(config.topics) == 1
    assert config.rules_for("/joint_states", "sensor_msgs/msg/JointState") == ()


def test_no_file_gives_the_defaults() -> None:
    assert load_bridge_config(None) == BridgeConfig()


def test_late_grace_s_is_read_and_zero_turns_the_wait_off(tmp_path: Path) -> None:
    path = tmp_path / "bridge.toml"
    assert BridgeConfig().late_grace_s == 2.0
    for text, expected in (("late_grace_s = 0.5\n", 0.5), ("late_grace_s = 0\n", 0.0)):
        path.write_text(text, encoding="utf-8")
        assert load_bridge_config(path).late_grace_s == expected


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("chunk_secs = 3\n", "chunk_secs"),
        ("chunk_seconds = -1\n", "chunk_seconds"),
        ("chunk_seconds = 0\n", "chunk_seconds"),
        ('chunk_seconds = "ten"\n', "chunk_seconds"),
        ("image_thumbnail_px = 6.5\n", "image_thumbnail_px"),
        ("default_topics = 1\n", "default_topics"),
        ('topics = "odom"\n', "topics"),
        ('[[topics]]\ntopic = "odom"\nconverter = "pose_trajectory"\n', "topics[0].topic"),
        ('[[topics]]\ntopic = "/odom"\nconverter = "teleport"\n', "topics[0].converter"),
        ('[[topics]]\ntopic = "/odom"\nconverter = "learn"\nmsgtype = "Odometry"\n', "topics[0].msgtype"),
        ('[[topics]]\ntopic = "*"\nconverter = "image"\n', "topics[0].msgtype"),
        ('[[topics]]\ntopic = "/odom"\nconverter = "learn"\nsample_every_s = -2\n', "topics[0].sample_every_s"),
        ('[[topics]]\ntopic = "/odom"\nconverter = "learn"\nqueue_length = 1.5\n', "topics[0].queue_length"),
        ('[[topics]]\ntopic = "/odom"\nconverter = "learn"\ncolour = "red"\n', "topics[0].colour"),
        ('[[topics]]\ntopic = "/odom"\nconverter = "pose_trajectory"\nperception_type = "smell"\n',
         "topics[0].perception_type"),
        ('[[topics]]\ntopic = "/odom"\nconverter = "pose_trajectory"\nperception_type = 3\n',
         "topics[0].perception_type"),
        ('[[topics]]\ntopic = "/notes"\nconverter = "learn"\nperception_type = "visual"\n',
         "topics[0].perception_type"),
        ('[[topics]]\ntopic = "/odom"\nconverter = "pose_trajectory"\nsample_every_s = inf\n',
         "topics[0].sample_every_s"),
        ('[[topics]]\ntopic = "/odom"\nconverter = "pose_trajectory"\nthrottle_rate_ms = true\n',
         "topics[0].throttle_rate_ms"),
        ('[[topics]]\ntopic = "/odom"\nconverter = "pose_trajectory"\nthrottle_rate_ms = 100.5\n',
         "topics[0].throttle_rate_ms"),
        ('[[topics]]\ntopic = "/odom"\nconverter = "pose_trajectory"\nmsgtype = 7\n', "topics[0].msgtype"),
        ("rdp_tolerance_m = nan\n", "rdp_tolerance_m"),
        ("max_episode_s = inf\n", "max_episode_s"),
        ("late_grace_s = -0.5\n", "late_grace_s"),
    ],
)
def test_a_bad_config_value_is_a_config_error_naming_the_key(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "bridge.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_bridge_config(path)
    assert info.value.field == field
    assert str(path) in info.value.message


def test_invalid_toml_and_a_missing_file_are_config_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("chunk_seconds = = 3\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_bridge_config(broken)
    with pytest.raises(ConfigError, match="cannot read"):
        load_bridge_config(tmp_path / "absent.toml")


def test_every_perception_type_robotmem_knows_is_accepted(tmp_path: Path) -> None:
    for kind in PERCEPTION_TYPES:
        path = tmp_path / f"{kind}.toml"
        path.write_text(f'[[topics]]\ntopic = "/odom"\nconverter = "pose_trajectory"\nperception_type = "{kind}"\n')
        (rule,) = load_bridge_config(path).rules_for("/odom", "nav_msgs/msg/Odometry")
        assert rule.perception_type == kind


@pytest.mark.parametrize("document", ["bridge.md", "replay.md"])
def test_the_bridge_toml_examples_in_the_docs_load(document: str, tmp_path: Path) -> None:
    import re

    text = (Path(__file__).resolve().parents[3] / "docs" / document).read_text(encoding="utf-8")
    examples = re.findall(r"```toml\n(.*?)```", text, re.DOTALL)
    assert examples
    for number, example in enumerate(examples):
        (tmp_path / f"{number}.toml").write_text(example, encoding="utf-8")
        load_bridge_config(tmp_path / f"{number}.toml")
