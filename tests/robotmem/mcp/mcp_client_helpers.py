"""Helpers for the MCP tests: start real servers, drive them with the SDK's own clients."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult

REPO_ROOT = Path(__file__).resolve().parents[3]
#: Generous bound for a server subprocess to start (imports, store, not the model): a hang
#: fails the test instead of blocking CI. It is not a speed assertion.
STARTUP_TIMEOUT_S = 120.0


#: The seven memory operations plus outcome_stats; a tool added or lost is a failing test.
TOOL_NAMES = frozenset({"learn", "recall", "save_perception", "forget", "update", "start_session", "end_session",
                        "outcome_stats"})


def server_env(home: Path, **extra: str) -> dict[str, str]:
    """Environment for a server subprocess: its own home, the shared model cache, the checkout."""
    env = {
        "ROBOTMEM_HOME": str(home),
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p),
        "PYTHONUNBUFFERED": "1",
    }
    models = os.environ.get("ROBOTMEM_MODELS_DIR")
    if models:
        env["ROBOTMEM_MODELS_DIR"] = models
    env.update(extra)
    return env


#: Seconds after which a request nothing answered fails (see stdio_session).
UNANSWERED_AFTER = 300.0


@asynccontextmanager
async def stdio_session(home: Path, log_path: Path, **env: str) -> AsyncIterator[ClientSession]:
    """``python -m robotmem`` as a subprocess, driven by the SDK's stdio client."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "robotmem"], env=server_env(home, **env), cwd=str(REPO_ROOT)
    )
    with log_path.open("a", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            # A request the server never answers (it died, or a reply could not be written) fails
            # after this instead of hanging the run: a safety net, not a measure of speed.
            ClientSession(read, write, read_timeout_seconds=UNANSWERED_AFTER) as session,
        ):
            await session.initialize()
            yield session


@asynccontextmanager
async def http_session(url: str, token: str | None = None) -> AsyncIterator[ClientSession]:
    """The SDK's streamable HTTP client, with a bearer token when given."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def _check_text_mirrors_structure(result: CallToolResult) -> None:
    # Older clients read only the text content; it must carry the same JSON.
    assert result.content, "a tool result needs text content for clients without structured output"
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]


async def call_ok(session: ClientSession, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a tool that must succeed; returns its structured content."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, f"{tool}({arguments}) failed: {result.content}"
    assert isinstance(result.structured_content, dict)
    _check_text_mirrors_structure(result)
    return result.structured_content


async def call_error(session: ClientSession, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a tool that must fail; returns the ``error`` object of its structured content."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, f"{tool}({arguments}) unexpectedly succeeded: {result.structured_content}"
    assert isinstance(result.structured_content, dict)
    _check_text_mirrors_structure(result)
    error = result.structured_content["error"]
    assert set(error) == {"code", "field", "message"}
    assert isinstance(error["message"], str) and error["message"]
    return error


async def read_json_resource(session: ClientSession, uri: str) -> Any:
    result = await session.read_resource(uri)
    (contents,) = result.contents
    assert contents.mime_type == "application/json"
    return json.loads(contents.text)  # type: ignore[union-attr]


async def start_session_with_memories(session: ClientSession) -> dict[str, Any]:
    """start_session, learn (x3) and save_perception (x2); JSON parameters alternately as
    objects and as strings. Returns the ids a test needs."""
    started = await call_ok(
        session, "start_session", {"collection": "kitchen", "context": {"task": {"name": "pick_cup"}}}
    )
    assert started["status"] == "started" and started["collection"] == "kitchen"
    sid = started["session_id"]

    grip = await call_ok(
        session,
        "learn",
        {
            "insight": "Grip force 12.5 N lifts the red ceramic cup without slipping",
            "context": {"params": {"grip_force": 12.5}, "task": {"name": "pick_cup"}},
            "session_id": sid,
        },
    )
    approach = await call_ok(
        session,
        "learn",
        {
            "insight": "Approach the mug handle from the left side to avoid the kettle",
            "context": json.dumps({"params": {"grip_force": 6.0}, "task": {"name": "pick_mug"}}),
            "session_id": sid,
        },
    )
    assert grip["status"] == approach["status"] == "created"
    # The same lesson with the same context, this time as a JSON string: the same memory.
    again = await call_ok(
        session,
        "learn",
        {
            "insight": "Grip force 12.5 N lifts the red ceramic cup without slipping",
            "context": json.dumps({"params": {"grip_force": 12.5}, "task": {"name": "pick_cup"}}),
            "session_id": sid,
        },
    )
    assert again == {**again, "memory_id": grip["memory_id"], "status": "duplicate"}

    touch = await call_ok(
        session,
        "save_perception",
        {
            "description": "Tactile array reading while holding the red cup",
            "perception_type": "tactile",
            "data": json.dumps({"pressure": [0.1, 0.4, 0.35, 0.05]}),
            "metadata": {"spatial": {"object_position": [1.0, 0.5]}},
            "session_id": sid,
        },
    )
    seen = await call_ok(
        session,
        "save_perception",
        {
            "description": "Camera sees the blue mug next to the kettle",
            "data": {"bbox": [120, 80, 64, 64]},
            "metadata": json.dumps({"spatial": {"object_position": [3.0, 2.0]}}),
            "session_id": sid,
        },
    )
    assert touch["payload_bytes"] > 0 and seen["payload_bytes"] > 0
    return {
        "sid": sid,
        "grip": grip["memory_id"],
        "approach": approach["memory_id"],
        "touch": touch["memory_id"],
    }


@dataclass
class HttpServer:
    url: str
    process: subprocess.Popen[str]
    log: list[str]
    reader: threading.Thread

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/")[0])


def wait_for_warm_up(server: HttpServer) -> None:
    """Until the server logs that its warm-up is over. Tool calls are let in while it still imports
    the later tools' modules (scipy, faiss): tens of MB a memory figure taken meanwhile would count."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not any("warm-up over" in line for line in list(server.log)):
        assert time.monotonic() < deadline, "the server's warm-up did not end"
        time.sleep(0.05)


def _pump_lines(stream: Any, lines: queue.Queue[str | None], log: list[str]) -> None:
    for line in stream:
        log.append(line)
        lines.put(line)
    lines.put(None)


def start_http_server(home: Path, *args: str, **env: str) -> HttpServer:
    """``python -m robotmem serve --transport http --port 0 ...``; returns once it listens.

    Readiness is the server's own "listening on URL" log line (port 0: the OS picks a free
    port and the line names it), read with a timeout, never a sleep.
    """
    command = [sys.executable, "-m", "robotmem", "serve", "--transport", "http", "--port", "0", *args]
    process = subprocess.Popen(
        command,
        env={**os.environ, **server_env(home, **env)},
        cwd=str(REPO_ROOT),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    log: list[str] = []
    reader = threading.Thread(target=_pump_lines, args=(process.stderr, lines, log), daemon=True)
    reader.start()
    pattern = re.compile(r"listening on (http://\S+)")
    while True:
        try:
            line = lines.get(timeout=STARTUP_TIMEOUT_S)
        except queue.Empty:
            stop_process(process)
            raise AssertionError("HTTP server did not start:\n" + "".join(log)) from None
        if line is None:
            stop_process(process)
            raise AssertionError("HTTP server exited:\n" + "".join(log))
        match = pattern.search(line)
        if match:
            return HttpServer(url=match.group(1), process=process, log=log, reader=reader)


def stop_http_server(server: HttpServer) -> int:
    """Stop the server and wait until its whole stderr is in ``server.log``."""
    code = stop_process(server.process)
    server.reader.join(timeout=30)
    return code


def stop_process(process: subprocess.Popen[str]) -> int:
    """End a server subprocess we started: SIGTERM, then SIGKILL if it ignores that."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait(timeout=30)


# -- raw JSON-RPC lines on stdio, as a client without an MCP library writes them ----------------

RAW_INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0", "id": "init", "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "raw-test", "version": "1"}},
}
RAW_INITIALIZED: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def raw_tool_call(request_id: int, tool: Any, arguments: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


def start_raw_stdio(home: Path, log: Path, **env: str) -> subprocess.Popen[str]:
    """``python -m robotmem`` with pipes for stdin and stdout; stderr goes to ``log``."""
    return subprocess.Popen(
        [sys.executable, "-m", "robotmem"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=log.open("w", encoding="utf-8"), env=server_env(home, **env), cwd=str(REPO_ROOT), text=True,
    )


def write_raw(process: subprocess.Popen[str], *messages: dict[str, Any] | str) -> None:
    """Each message as one line (a str is written as it is)."""
    assert process.stdin is not None
    for message in messages:
        process.stdin.write((message if isinstance(message, str) else json.dumps(message)) + "\n")
    process.stdin.flush()


def close_and_read_answers(process: subprocess.Popen[str]) -> dict[Any, list[dict[str, Any]]]:
    """Close stdin now, read stdout to its end: the answers by id (a list, to see duplicates)."""
    try:  # communicate() closes stdin first, then reads stdout to its end
        out, _ = process.communicate(timeout=STARTUP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError("the server did not exit after stdin closed") from None
    assert process.returncode == 0
    answers: dict[Any, list[dict[str, Any]]] = {}
    for line in out.splitlines():
        message = json.loads(line)
        answers.setdefault(message.get("id"), []).append(message)
    return answers
