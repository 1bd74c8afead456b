"""Fixtures for the MCP server tests: real server subprocesses driven by the SDK's own clients."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult

REPO_ROOT = Path(__file__).resolve().parents[3]
#: Generous bound for a server subprocess to start (imports, store, not the model): a hang
#: fails the test instead of blocking CI. It is not a speed assertion.
STARTUP_TIMEOUT_S = 120.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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


@asynccontextmanager
async def stdio_session(home: Path, log_path: Path, **env: str) -> AsyncIterator[ClientSession]:
    """``python -m robotmem`` as a subprocess, driven by the SDK's stdio client."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "robotmem"], env=server_env(home, **env), cwd=str(REPO_ROOT)
    )
    with log_path.open("a", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
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


@dataclass
class HttpServer:
    url: str
    process: subprocess.Popen[str]
    log: list[str]

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/")[0])


def _pump_lines(stream: Any, lines: queue.Queue[str | None], log: list[str]) -> None:
    for line in stream:
        log.append(line)
        lines.put(line)
    lines.put(None)


def start_http_server(home: Path, *args: str, **env: str) -> HttpServer:
    """``python -m robotmem.mcp --transport http --port 0 ...``; returns once it listens.

    Readiness is the server's own "listening on URL" log line (port 0: the OS picks a free
    port and the line names it), read with a timeout, never a sleep.
    """
    command = [sys.executable, "-m", "robotmem.mcp", "--transport", "http", "--port", "0", *args]
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
    threading.Thread(target=_pump_lines, args=(process.stderr, lines, log), daemon=True).start()
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
            return HttpServer(url=match.group(1), process=process, log=log)


def stop_process(process: subprocess.Popen[str]) -> int:
    """End a server subprocess we started: SIGTERM, then SIGKILL if it ignores that."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait(timeout=30)


@pytest.fixture
def http_server_factory(robotmem_home: Path) -> Iterator[Any]:
    """Start HTTP servers for one test; all of them are stopped afterwards."""
    started: list[HttpServer] = []

    def start(*args: str, home: Path | None = None, **env: str) -> HttpServer:
        server = start_http_server(home or robotmem_home, *args, **env)
        started.append(server)
        return server

    yield start
    for server in started:
        stop_process(server.process)
