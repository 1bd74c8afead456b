"""The command line answers bad JSON in --filter / --context with one error line naming the field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from robotmem.cli.main import main

DEEP = "[" * 100_000


CASES = [
    (["recall", "gripper", "--filter", DEEP], "context_filter"),
    (["recall", "gripper", "--filter", '{"a": "\\ud800"}'], "context_filter"),
    (["learn", "gripper slips on wet glass", "--context", '{"a":' * 3000 + "1" + "}" * 3000], "context"),
    (["learn", "gripper slips on wet glass", "--context", '{"a": 99999999999999999999}'], "context"),
]


@pytest.fixture(autouse=True)
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROBOTMEM_EMBEDDINGS", "off")  # the model is not needed to refuse an argument


@pytest.mark.parametrize(("argv", "field"), CASES)
def test_bad_json_argument_is_an_error_line(capsys, robotmem_home: Path, argv: list[str], field: str):
    assert main(argv) == 1
    assert capsys.readouterr().err.startswith(f"error ({field}")


@pytest.mark.parametrize(("argv", "field"), [CASES[0], CASES[2]])
def test_the_console_command_prints_no_traceback(robotmem_home: Path, argv: list[str], field: str):
    proc = subprocess.run([sys.executable, "-m", "robotmem", *argv], capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"error ({field}"), proc.stderr
