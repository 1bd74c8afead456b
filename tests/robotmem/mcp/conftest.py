"""Fixtures for the MCP server tests (helpers live in mcp_client_helpers)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_client_helpers import HttpServer, start_http_server, stop_http_server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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
        stop_http_server(server)
