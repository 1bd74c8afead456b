"""The `robotmem ui` process the browser tests drive, and where their screenshots go."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
#: Screenshots are test artefacts (build/ is ignored by git); CI keeps the folder.
ARTIFACTS = REPO / "build" / "test-artifacts" / "ui"


class UiServer:
    def __init__(self, home: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "robotmem.cli.main", "ui", "--port", "0", *args],
            env={**os.environ, "ROBOTMEM_HOME": str(home), **(env or {})},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.lines: list[str] = []
        for line in self.process.stdout:
            self.lines.append(line)
            if line.startswith("robotmem ui: "):
                self.url = line.split()[2]
                return
        raise AssertionError("robotmem ui exited: " + "".join(self.lines) + self.process.stderr.read())  # type: ignore[union-attr]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def page_errors(browser: object) -> list[str]:
    """Uncaught JavaScript errors logged since the last call (the browser fixture keeps its console log)."""
    entries = browser.get_log("browser")  # type: ignore[attr-defined]
    return [e["message"] for e in entries if "Uncaught" in e["message"]]
