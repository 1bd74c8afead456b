"""Drive ``python -m robotmem`` with raw bytes on its stdin and read its stdout line by line."""

from __future__ import annotations

import json
import os
import queue
import resource
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
#: Generous bound for one answer: a request that is never answered fails the test instead
#: of hanging CI. Not a speed assertion.
ANSWER_TIMEOUT_S = 60.0


def _limit_files(max_bytes: int) -> object:
    """A file-size limit for the child: writes past it fail with EFBIG, a real I/O error."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))

    return limit


class RawServer:
    """The stdio server as a subprocess; ``send`` writes bytes, ``answer`` reads one JSON line."""

    def __init__(self, home: Path, *, max_file_bytes: int | None = None, **env: str) -> None:
        environment = {**os.environ, "ROBOTMEM_HOME": str(home), "ROBOTMEM_EMBEDDINGS": "off", **env,
                       "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
        self.process = subprocess.Popen([sys.executable, "-m", "robotmem"], env=environment, cwd=REPO,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        preexec_fn=None if max_file_bytes is None else _limit_files(max_file_bytes))
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.request({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def send(self, raw: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(raw)
        self.process.stdin.flush()

    def answer(self) -> dict[str, Any]:
        line = self._lines.get(timeout=ANSWER_TIMEOUT_S)
        assert line is not None, "the server closed its stdout"
        message = json.loads(line)
        assert isinstance(message, dict)
        return message

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(json.dumps(message).encode() + b"\n")
        return self.answer()

    def call(self, request_id: Any, tool: str, arguments: Any) -> dict[str, Any]:
        return self.request({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                             "params": {"name": tool, "arguments": arguments}})

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
