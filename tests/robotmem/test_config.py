import json
from pathlib import Path

import pytest

from robotmem import Config, ConfigError


def test_defaults_put_the_store_in_robotmem_home(robotmem_home: Path):
    config = Config.load()
    assert config.home == robotmem_home
    assert config.database == robotmem_home / "memory.db"
    assert config.model_cache == robotmem_home / "models" or config.models_dir is not None


def test_explicit_beats_environment_beats_file(robotmem_home: Path, monkeypatch: pytest.MonkeyPatch):
    (robotmem_home / "config.json").write_text(json.dumps({"half_life_days": 10, "collection": "file"}))
    assert Config.load().half_life_days == 10.0
    monkeypatch.setenv("ROBOTMEM_HALF_LIFE_DAYS", "20")
    assert Config.load().half_life_days == 20.0
    assert Config.load().collection == "file"
    assert Config.load(half_life_days=40).half_life_days == 40.0


def test_unknown_option_in_the_config_file_is_a_config_error(robotmem_home: Path):
    (robotmem_home / "config.json").write_text(json.dumps({"halflife": 3}))
    with pytest.raises(ConfigError, match="halflife"):
        Config.load()


def test_unparseable_environment_value_names_the_option(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ROBOTMEM_MAX_PAYLOAD_BYTES", "lots")
    with pytest.raises(ConfigError, match="max_payload_bytes"):
        Config.load()
