from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def run_replay() -> Callable[..., None]:
    """`robotmem replay FILE ...` as a user runs it, into the test's ROBOTMEM_HOME."""

    def run(path: Path, *args: str) -> None:
        proc = subprocess.run([sys.executable, "-m", "robotmem.cli.main", "replay", str(path), *args],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr

    return run


@pytest.fixture
def tactile_episode() -> Callable[..., str]:
    """An open episode of ``records`` tactile chunks 1 s apart on /fingertip, each with ``keys`` curves."""

    def write(mem: Any, records: int, keys: int = 1) -> str:
        sid: str = mem.start_session()["session_id"]
        mem.save_perceptions([{"description": f"fingertip chunk {i}", "perception_type": "tactile", "session_id": sid,
                               "metadata": {"source": {"topic": "/fingertip"}}, "embed": False,
                               "data": {"t0_ns": (1_800_000_000 + i) * 10**9, "t": [0.0, 0.5],
                                        **{f"f{k}": [float(i), float(i + k)] for k in range(keys)}}}
                              for i in range(records)])
        return sid

    return write
