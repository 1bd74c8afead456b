"""`robotmem bridge` through the real robotmem CLI: options and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from robotmem.cli.main import build_parser, main


def test_bridge_command_is_registered_with_the_documented_options() -> None:
    args = build_parser().parse_args(["--collection", "lab", "bridge", "--url", "ws://10.0.0.5:9090",
                                      "--config", "bridge.toml", "--robot-id", "tb3"])
    assert (args.url, args.config, args.robot_id, args.collection) == (
        "ws://10.0.0.5:9090", Path("bridge.toml"), "tb3", "lab")  # --collection before the command survives


def test_bridge_command_with_a_non_websocket_url_exits_2_naming_url(
        robotmem_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bridge", "--url", "http://127.0.0.1:9090"]) == 2
    assert "url: expected ws://HOST:PORT" in capsys.readouterr().err


def test_bridge_command_with_a_bad_config_exits_2_naming_the_key(
        robotmem_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "bridge.toml"
    config.write_text('[[topics]]\ntopic = "/odom"\nconverter = "teleport"\n', encoding="utf-8")
    assert main(["--json", "bridge", "--config", str(config)]) == 2
    captured = capsys.readouterr()
    assert "topics[0].converter" in captured.err and '"field": "topics[0].converter"' in captured.out


def test_bridge_command_with_a_zero_queue_exits_2_naming_the_option(
        robotmem_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bridge", "--queue-size", "0"]) == 2
    assert "--queue-size" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--queue-mb", "--held-mb"])
@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_bridge_command_with_a_byte_bound_that_is_not_a_size_exits_2_naming_the_option(
        robotmem_home: Path, capsys: pytest.CaptureFixture[str], option: str, value: str) -> None:
    assert main(["--json", "bridge", option, value]) == 2
    captured = capsys.readouterr()
    assert option in captured.err and f'"field": "{option[2:].replace("-", "_")}"' in captured.out


def test_bridge_command_passes_its_byte_bounds_to_the_inbox_and_the_outbox() -> None:
    from bridges.rosbridge.cli import _options

    args = build_parser().parse_args(["--collection", "lab", "bridge", "--queue-mb", "48", "--held-mb", "8"])
    options = _options(args)
    assert options.queue_max_bytes == 48 * 2**20 and options.write_retry.max_pending_bytes == 8 * 2**20
    defaults = _options(build_parser().parse_args(["--collection", "lab", "bridge"]))
    assert defaults.queue_max_bytes == 256 * 2**20 and defaults.write_retry.max_pending_bytes == 64 * 2**20


def test_bridge_command_reads_bridge_toml_from_the_home_folder_without_config(
        robotmem_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (robotmem_home / "bridge.toml").write_text(
        '[[topics]]\ntopic = "/odom"\nconverter = "pose_trajectory"\nperception_type = "smell"\n', encoding="utf-8")
    assert main(["bridge"]) == 2  # the home config was read (and refused) before connecting
    assert "topics[0].perception_type" in capsys.readouterr().err
    assert not (robotmem_home / "memory.db").exists()


@pytest.mark.parametrize("command", ["robotmem", "python -m bridges.rosbridge"])
def test_a_prefix_of_a_bridge_option_is_refused_not_taken_for_the_option(
        command: str, robotmem_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `--dry` ran as `--dry-run`, `--rec 5` as `--reconnect-max 5`: both spellings now exit 2 naming it
    from bridges.rosbridge.__main__ import main as module_main

    with pytest.raises(SystemExit) as exited:
        # --url http: taken as --dry-run, the command ends at once on the url instead of connecting
        words = ["--dry", "--url", "http://127.0.0.1:9"]
        main(["bridge", *words]) if command == "robotmem" else module_main(words)
    assert exited.value.code == 2 and "unrecognized arguments: --dry" in capsys.readouterr().err
