"""The stdio wire under clients that misbehave: signals, a closed stdout, no reading, huge lines.

Each test runs a real ``python -m robotmem`` subprocess on a real SQLite file and talks raw
JSON-RPC lines to it, as a client without an MCP library does.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from mcp_client_helpers import REPO_ROOT, STARTUP_TIMEOUT_S, server_env

from robotmem.mcp.stdio import MAX_UNANSWERED

#: How long a paused reader must stay paused to count as stopped. Only a server that keeps
#: reading could fail the test by a pause this long ending; it is not a speed assertion.
QUIET_S = 5.0
_F_GETPIPE_SZ = 1032  # Linux fcntl


class Wire:
    """The server's stdin and stdout as the client's raw byte pipes; stderr goes to ``log``."""

    def __init__(self, home: Path, log: Path, **env: str) -> None:
        # A test run started in the background of a non-interactive shell has SIGINT ignored,
        # and children inherit that; a handler set here is reset to the default in the child.
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "robotmem"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=log.open("wb"), env=server_env(home, ROBOTMEM_EMBEDDINGS="off", **env), cwd=str(REPO_ROOT),
            )
        finally:
            signal.signal(signal.SIGINT, previous)
        self.home, self.log = home, log
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout
        self.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "wire", "version": "0"}}})
        assert self.answer()["id"] == "init"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, *messages: dict[str, Any] | bytes) -> None:
        for message in messages:
            self.stdin.write(message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n")
        self.stdin.flush()

    def answer(self) -> dict[str, Any]:
        line = self.stdout.readline()
        assert line, "the server closed its stdout"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def call(self, request_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.send(call(request_id, tool, arguments))
        answer = self.answer()
        assert answer["id"] == request_id, answer
        return answer

    def wait(self) -> int:
        try:
            return self.process.wait(timeout=STARTUP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError("the server did not exit") from None

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8")


def call(request_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


def _stored_access_counts(home: Path) -> int:
    with sqlite3.connect(home / "memory.db") as db:
        return int(db.execute("SELECT COALESCE(SUM(access_count), 0) FROM memories").fetchone()[0])


def _recall_hits(wire: Wire, first_id: int, calls: int) -> int:
    """Recalls (their access counts are buffered in the server until a write or close)."""
    hits = 0
    for request_id in range(first_id, first_id + calls):
        answer = wire.call(request_id, "recall", {"query": "red cup weighs grams", "n": 5, "min_relevance": 0})
        hits += answer["result"]["structuredContent"]["count"]
    return hits


def _warm(wire: Wire) -> int:
    for i in range(5):
        assert wire.call(i, "learn", {"insight": f"the red cup weighs {i}00 grams"})["result"]["isError"] is False
    hits = _recall_hits(wire, 100, 20)
    assert hits == 100
    # Tool calls are let in while the warm-up still imports the later tools' modules (scipy, faiss):
    # tens of MB that a memory figure taken meanwhile would count as the test's.
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while "warm-up over" not in wire.log_text():
        assert time.monotonic() < deadline, "the server's warm-up did not end"
        time.sleep(0.05)
    return hits


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_ends_an_idle_server_whose_client_keeps_stdin_open_and_the_store_is_closed(
    tmp_path: Path, signum: signal.Signals
) -> None:
    wire = Wire(tmp_path / "home", tmp_path / "server.log")
    hits = _warm(wire)
    # Idle now: the server waits for a line that never comes, stdin stays open.
    wire.process.send_signal(signum)
    assert wire.wait() == 0, wire.log_text()
    log = wire.log_text()
    assert "termination signal received" in log and "memory store closed" in log, log
    assert _stored_access_counts(wire.home) == hits, "the recalls' buffered access counts are written on close"
    wire.stdin.close()


def test_a_client_that_closes_stdout_ends_the_server_quietly_with_141_and_the_store_closed(tmp_path: Path) -> None:
    wire = Wire(tmp_path / "home", tmp_path / "server.log")
    hits = _warm(wire)
    wire.stdout.close()
    # stdin stays open: the server must not wait for more input to notice.
    wire.send(call(900, "recall", {"query": "red cup weighs grams", "n": 5, "min_relevance": 0}))
    assert wire.wait() == 141, wire.log_text()
    log = wire.log_text()
    assert "Traceback" not in log, log
    assert [line for line in log.splitlines() if "stdout" in line] == [
        next(line for line in log.splitlines() if "WARNING robotmem.mcp: stdout was closed by the client" in line)]
    assert "memory store closed" in log
    # The last recall ran (its answer had nowhere to go): its counts are stored as well.
    assert _stored_access_counts(wire.home) == hits + 5
    wire.stdin.close()


def test_a_client_that_does_not_read_stops_the_server_reading_and_then_gets_every_answer(tmp_path: Path) -> None:
    wire = Wire(tmp_path / "home", tmp_path / "server.log")
    _warm(wire)
    total = 5000
    lines = [json.dumps(call(10_000 + i, "recall", {"query": "red cup weighs grams", "n": 5, "min_relevance": 0}))
             .encode() + b"\n" for i in range(total)]
    sample = wire.call(1, "recall", {"query": "red cup weighs grams", "n": 5, "min_relevance": 0})
    answer_bytes = len(json.dumps(sample))
    fd = wire.stdin.fileno()
    os.set_blocking(fd, False)
    written = 0
    while written < total:
        try:
            os.write(fd, lines[written])  # under PIPE_BUF: all or nothing
            written += 1
        except BlockingIOError:
            if not select.select([], [fd], [], QUIET_S)[1]:
                break  # the server stopped reading stdin
    # What the server can have taken in: the requests waiting for an answer, the answers
    # that fit in its stdout pipe, and what fits in its stdin pipe and its one read ahead.
    stdout_room = fcntl.fcntl(wire.stdout.fileno(), _F_GETPIPE_SZ)
    stdin_room = fcntl.fcntl(fd, _F_GETPIPE_SZ) + 64 * 1024
    bound = MAX_UNANSWERED + stdout_room // answer_bytes + 1 + stdin_room // len(lines[0]) + 1
    assert written <= bound < total, f"the server read {written} requests nobody read the answers of"

    answers: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: answers.extend(json.loads(line) for line in wire.stdout), daemon=True)
    reader.start()
    os.set_blocking(fd, True)
    wire.stdin.write(b"".join(lines[written:]))
    wire.stdin.close()
    assert wire.wait() == 0
    reader.join(STARTUP_TIMEOUT_S)
    assert sorted(answer["id"] for answer in answers) == list(range(10_000, 10_000 + total))
    assert all(answer["result"]["structuredContent"]["count"] == 5 for answer in answers)


def _peak_and_now_kb(pid: int) -> tuple[int, int]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(fields["VmHWM"].split()[0]), int(fields["VmRSS"].split()[0])


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's memory from /proc")
def test_a_line_over_the_cap_is_refused_naming_the_limit_without_being_held_and_the_server_goes_on(
    tmp_path: Path
) -> None:
    # max_payload_bytes 1 MiB: the cap is the HTTP body cap, at least the SDK's 4 MiB.
    wire = Wire(tmp_path / "home", tmp_path / "server.log", ROBOTMEM_MAX_PAYLOAD_BYTES=str(1024 * 1024))
    _warm(wire)
    peak_before, _ = _peak_and_now_kb(wire.process.pid)
    line = (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"save_perception","arguments":'
            b'{"description":"a huge array","data":[' + b",".join([b"0.123456789"] * 4_000_000) + b"]}}}\n")
    wire.send(line)
    answer = wire.answer()
    assert answer["id"] == 7 and answer["error"]["code"] == -32600, answer
    assert f"the limit is {4 * 1024 * 1024} bytes" in answer["error"]["message"]
    assert f"the line is {len(line) - 1} bytes" in answer["error"]["message"]
    peak_after, _ = _peak_and_now_kb(wire.process.pid)
    # 48 MB of text; holding it, let alone parsing it, would cost it at least once over.
    assert (peak_after - peak_before) * 1024 < len(line) // 4, (peak_before, peak_after)
    assert wire.call(8, "learn", {"insight": "still serving after the huge line"})["result"]["isError"] is False
    wire.stdin.close()
    assert wire.wait() == 0


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's memory from /proc")
def test_a_large_refused_call_gives_its_memory_back_once_answered(tmp_path: Path) -> None:
    wire = Wire(tmp_path / "home", tmp_path / "server.log")
    _warm(wire)
    _, before = _peak_and_now_kb(wire.process.pid)
    floats = b",".join([b"0.123456789"] * 3_000_000)  # 36 MB of text: under the cap, over max_payload_bytes
    wire.send(b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"save_perception","arguments":'
              b'{"description":"a large array","data":[' + floats + b"]}}}\n")
    answer = wire.answer()
    assert answer["result"]["structuredContent"]["error"]["field"] == "data", answer
    peak, _ = _peak_and_now_kb(wire.process.pid)
    assert peak - before > 100 * 1024, "parsing it took memory"
    # Idle now, no further message: nothing may keep the line or its parsed floats (~300 MB)
    # alive. The worker thread that ran the call lets go of its arguments a moment after
    # reporting back, so the memory is watched for a while (a hang guard, not a speed limit).
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while (after := _peak_and_now_kb(wire.process.pid)[1]) - before >= 60 * 1024 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (after - before) < 60 * 1024, (before, peak, after)
    wire.stdin.close()
    assert wire.wait() == 0
