"""``robotmem bridge --dry-run`` converts and counts, and never creates or writes the store."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

from rosbridge_helpers import wait_subscribed, zigzag_odometry

from bridges.rosbridge.testing import RosbridgeTestServer

REPO = Path(__file__).resolve().parents[3]


def _lines(stream: object) -> queue.Queue[str]:
    """The lines of a pipe, as they arrive, read on a thread (so the test can wait with a timeout)."""
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:  # type: ignore[attr-defined]
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _wait_for_line(lines: queue.Queue[str], needle: str, timeout: float) -> list[str]:
    seen: list[str] = []
    while True:
        line = lines.get(timeout=timeout)  # queue.Empty fails the test
        seen.append(line)
        if needle in line:
            return seen


def test_bridge_dry_run_creates_no_database(rosbridge_server: RosbridgeTestServer, robotmem_home: Path) -> None:
    command = [sys.executable, "-m", "robotmem", "--json", "bridge", "--dry-run", "--url", rosbridge_server.url,
               "--status-interval", "0.2"]
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ))
    try:
        assert proc.stderr is not None
        err_lines = _lines(proc.stderr)
        wait_subscribed(rosbridge_server, "/odom", timeout=120)
        for i in range(50):
            rosbridge_server.publish("/odom", zigzag_odometry(i))
        _wait_for_line(err_lines, "/odom ", timeout=60)  # a status line with the topic: messages arrived
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    counters = json.loads(out)
    assert counters["received"]["/odom"] >= 1 and counters["fed"] == counters["received"]
    assert not (robotmem_home / "memory.db").exists()
    assert list(robotmem_home.iterdir()) == []
