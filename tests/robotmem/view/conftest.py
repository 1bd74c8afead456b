from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def run_replay() -> Callable[..., None]:
    """`robotmem replay FILE ...` as a user runs it, into the test's ROBOTMEM_HOME."""

    def run(path: Path, *args: str) -> None:
        proc = subprocess.run([sys.executable, "-m", "robotmem.cli.main", "replay", str(path), *args],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr

    return run
