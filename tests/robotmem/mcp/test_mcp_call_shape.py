"""A ``tools/call`` whose ``name`` or ``arguments`` has the wrong shape gets a JSON-RPC error
naming the field, over stdio and over HTTP, and the server keeps serving.

The SDK refuses these before any tool runs, as -32602 "Invalid request parameters" with
empty ``data``; robotmem's server middleware (robotmem/mcp/call_shape.py) answers them first
with the same code and the field. Raw JSON-RPC, as no SDK client can send such a call.
"""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import pytest
from mcp_client_helpers import (
    RAW_INITIALIZE,
    RAW_INITIALIZED,
    HttpServer,
    close_and_read_answers,
    raw_tool_call,
    start_raw_stdio,
    write_raw,
)

from robotmem import Memory

#: (params of a tools/call, the field named, the message)
MALFORMED: list[tuple[dict[str, Any], str, str]] = [
    ({"name": "learn", "arguments": ["the cup is red"]}, "arguments",
     "tools/call: arguments must be a JSON object, got array"),
    ({"name": "learn", "arguments": '{"insight": "the cup is red"}'}, "arguments",
     "tools/call: arguments must be a JSON object, got string"),
    ({"arguments": {"insight": "the cup is red"}}, "name", "tools/call: name is required (the tool to call)"),
    ({"name": 7, "arguments": {"insight": "the cup is red"}}, "name", "tools/call: name must be a string, got number"),
    ({"name": None, "arguments": {}}, "name", "tools/call: name must be a string, got null"),
]


def _check(answer: dict[str, Any], field: str, message: str) -> None:
    assert answer["error"] == {"code": -32602, "message": message, "data": {"field": field}}


def test_over_stdio_each_malformed_call_names_its_field_and_stores_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    process = start_raw_stdio(home, tmp_path / "server.log", ROBOTMEM_EMBEDDINGS="off")
    calls = [{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}
             for i, (params, _, _) in enumerate(MALFORMED, 1)]
    good = raw_tool_call(100, "learn", {"insight": "the next call still works"})
    # arguments null (or absent) is allowed by MCP: the tool reports its own missing parameter.
    no_arguments = raw_tool_call(101, "learn", None)
    write_raw(process, RAW_INITIALIZE, RAW_INITIALIZED, *calls, good, no_arguments)
    answers = close_and_read_answers(process)
    for i, (_, field, message) in enumerate(MALFORMED, 1):
        (answer,) = answers[i]
        _check(answer, field, message)
    assert answers[100][0]["result"]["structuredContent"]["status"] == "created"
    missing = answers[101][0]["result"]
    assert missing["isError"] is True and missing["structuredContent"]["error"]["field"] == "insight"
    with Memory(home / "memory.db", embedder=None) as mem:
        assert mem.stats()["memories"] == 1


def _post(server: HttpServer, message: dict[str, Any], session_id: str | None) -> tuple[dict[str, str], Any]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-06-18"}
    if session_id is not None:
        headers["Mcp-Session-Id"] = session_id
    try:
        connection.request("POST", "/mcp", body=json.dumps(message), headers=headers)
        response = connection.getresponse()
        body = response.read().decode()
        assert response.status in (200, 202), body
        found = {k.lower(): v for k, v in response.getheaders()}
    finally:
        connection.close()
    if not body:
        return found, None
    if found.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in body.splitlines() if line.startswith("data:") and line[5:].strip()]
        return found, json.loads(data[-1])
    return found, json.loads(body)


@pytest.mark.parametrize(("params", "field", "message"), MALFORMED[:3])
def test_over_http_a_malformed_call_names_its_field(
    http_server_factory: Any, params: dict[str, Any], field: str, message: str
) -> None:
    server: HttpServer = http_server_factory(ROBOTMEM_EMBEDDINGS="off")
    headers, _ = _post(server, RAW_INITIALIZE, None)
    session_id = headers.get("mcp-session-id")
    _post(server, RAW_INITIALIZED, session_id)
    _, answer = _post(server, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, session_id)
    _check(answer, field, message)
    _, answer = _post(server, raw_tool_call(2, "learn", {"insight": "the next call still works"}), session_id)
    assert answer["result"]["structuredContent"]["status"] == "created"
