"""Streamable HTTP at /mcp on a loopback port: the SDK's HTTP client end to end, bearer
token enforcement with plain HTTP requests, Origin validation, and the refusal to expose
an unprotected server beyond loopback."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_client_helpers import (
    TOOL_NAMES,
    REPO_ROOT,
    HttpServer,
    call_error,
    call_ok,
    http_session,
    read_json_resource,
    server_env,
    start_session_with_memories,
    stop_http_server,
    wait_for_warm_up,
)

TOKEN = "test-token-5f0c2a"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "plain-http-test", "version": "0"},
    },
}


def _post_initialize(server: HttpServer, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """One raw POST to /mcp, as a client that knows nothing of MCP libraries would send it."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        connection.request(
            "POST",
            "/mcp",
            body=json.dumps(INITIALIZE),
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                **headers,
            },
        )
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


@pytest.fixture
def token_server(http_server_factory: Any) -> HttpServer:
    server: HttpServer = http_server_factory(ROBOTMEM_TOKEN=TOKEN, ROBOTMEM_EMBEDDINGS="off")
    return server


def test_the_server_listens_on_loopback_at_the_mcp_path(token_server: HttpServer) -> None:
    assert token_server.url.startswith("http://127.0.0.1:") and token_server.url.endswith("/mcp")


def test_without_a_token_the_request_is_401(token_server: HttpServer) -> None:
    status, headers, body = _post_initialize(token_server, {})
    assert status == 401
    assert headers["www-authenticate"].startswith("Bearer")
    assert json.loads(body)["error"]["code"] == "unauthorized"


def test_with_a_wrong_token_the_request_is_401(token_server: HttpServer) -> None:
    status, _, _ = _post_initialize(token_server, {"Authorization": "Bearer not-the-token"})
    assert status == 401


def test_with_the_right_token_a_plain_request_initializes(token_server: HttpServer) -> None:
    status, headers, body = _post_initialize(token_server, {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200, body
    assert "mcp-session-id" in headers or b'"serverInfo"' in body


def test_a_foreign_origin_is_403_even_with_the_right_token(token_server: HttpServer) -> None:
    status, _, body = _post_initialize(
        token_server, {"Authorization": f"Bearer {TOKEN}", "Origin": "https://evil.example"}
    )
    assert status == 403
    assert json.loads(body)["error"]["code"] == "forbidden"


def test_a_rebinding_host_header_is_refused(token_server: HttpServer) -> None:
    status, _, _ = _post_initialize(
        token_server, {"Authorization": f"Bearer {TOKEN}", "Host": f"evil.example:{token_server.port}"}
    )
    assert status == 421


@pytest.mark.anyio
async def test_the_sdk_http_client_with_the_token_uses_all_tools_and_resources(
    token_server: HttpServer,
) -> None:
    async with http_session(token_server.url, TOKEN) as session:
        tools = {tool.name for tool in (await session.list_tools()).tools}
        assert tools == TOOL_NAMES
        ids = await start_session_with_memories(session)

        by_filter = await call_ok(
            session,
            "recall",
            {"query": "", "collection": "kitchen", "context_filter": '{"task.name": "pick_mug"}'},
        )
        assert [hit["id"] for hit in by_filter["results"]] == [ids["approach"]]
        found = await call_ok(session, "recall", {"query": "red cup grip force", "collection": "kitchen"})
        assert found["mode"] == "bm25_only" and found["results"][0]["id"] == ids["grip"]

        await call_ok(session, "update", {"memory_id": ids["approach"], "new_content": "Use the mug handle"})
        await call_ok(session, "forget", {"memory_id": ids["touch"], "reason": "sensor was miscalibrated"})
        ended = await call_ok(session, "end_session", {"session_id": ids["sid"], "outcome_score": 0.4})
        assert ended["status"] == "ended"

        error = await call_error(session, "recall", {"query": "cup", "n": 101})
        assert (error["code"], error["field"]) == ("validation_error", "n")

        timeline = await read_json_resource(session, f"robotmem://sessions/{ids['sid']}")
        assert ids["grip"] in [record["id"] for record in timeline["memories"]]
        stats = await read_json_resource(session, "robotmem://stats")
        assert stats["facts"] == 2
        status = await read_json_resource(session, "robotmem://status")
        assert status == {**status, "store": "ready", "embeddings": "off"}


@pytest.mark.anyio
async def test_two_http_clients_share_one_store(token_server: HttpServer) -> None:
    async with http_session(token_server.url, TOKEN) as writer:
        stored = await call_ok(writer, "learn", {"insight": "The lab door sticks; push it twice"})
        async with http_session(token_server.url, TOKEN) as reader:
            found = await call_ok(reader, "recall", {"query": "lab door"})
    assert found["results"][0]["id"] == stored["memory_id"]


@pytest.mark.anyio
async def test_without_a_configured_token_loopback_clients_need_none(http_server_factory: Any) -> None:
    server: HttpServer = http_server_factory(ROBOTMEM_EMBEDDINGS="off")
    async with http_session(server.url) as session:
        learned = await call_ok(session, "learn", {"insight": "Open loopback server works without a token"})
    assert learned["status"] == "created"


def test_binding_a_non_loopback_address_without_a_token_is_refused(robotmem_home: Path) -> None:
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "robotmem",
            "serve",
            "--transport",
            "http",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
        ],
        env={**os.environ, **server_env(robotmem_home)},
        cwd=str(REPO_ROOT),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 2
    assert "refusing to serve on 0.0.0.0 without a token" in completed.stderr
    assert "ROBOTMEM_TOKEN" in completed.stderr


def test_sigterm_shuts_the_server_down_and_closes_the_store(http_server_factory: Any) -> None:
    server: HttpServer = http_server_factory(ROBOTMEM_EMBEDDINGS="off")
    stop_http_server(server)
    log = "".join(server.log)
    assert "memory store open" in log and "memory store closed" in log


def test_a_get_opens_no_stream(token_server: HttpServer) -> None:
    # Stateless, the SDK would hold an SSE stream open per GET that robotmem never writes
    # to; a client that lost power would leave it open for good.
    connection = http.client.HTTPConnection("127.0.0.1", token_server.port, timeout=60)
    try:
        connection.request(
            "GET", "/mcp", headers={"Accept": "text/event-stream", "Authorization": f"Bearer {TOKEN}"}
        )
        response = connection.getresponse()
        assert (response.status, response.getheader("allow")) == (405, "POST")
        assert json.loads(response.read())["error"]["code"] == "method_not_allowed"
    finally:
        connection.close()


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


#: Clients that initialize and vanish without DELETE (a robot losing power). A stateful
#: session cost ~41 KB for 30 minutes, so these grew the server by ~80 MB; 10,000 of them
#: filled the SDK's session cap and every new client got 503 for half an hour.
ABANDONED = 2_000
#: A quarter of what the abandoned sessions held before; stateless, growth is ~1 MB.
ABANDONED_GROWTH_KB = ABANDONED * 41 // 4


@pytest.mark.anyio
async def test_clients_that_vanish_without_delete_leave_nothing_behind(http_server_factory: Any) -> None:
    server: HttpServer = http_server_factory(ROBOTMEM_EMBEDDINGS="off")

    def initialize_and_vanish() -> dict[str, str]:
        status, headers, body = _post_initialize(server, {})
        assert status == 200 and b'"serverInfo"' in body
        return headers

    wait_for_warm_up(server)
    # Warm-up: the first requests grow the heap and the allocator's arenas once.
    for _ in range(200):
        initialize_and_vanish()
    baseline = _rss_kb(server.process.pid)
    sessions = [initialize_and_vanish().get("mcp-session-id") for _ in range(ABANDONED)]
    grown = _rss_kb(server.process.pid) - baseline
    assert grown < ABANDONED_GROWTH_KB, f"{ABANDONED} abandoned clients grew the server by {grown} KB"
    # No session id: the server keeps nothing for a client once it answered.
    assert sessions == [None] * ABANDONED

    async with http_session(server.url) as session:
        learned = await call_ok(session, "learn", {"insight": "A new robot joins after many vanished"})
        found = await call_ok(session, "recall", {"query": "new robot joins", "min_relevance": 0})
    assert found["results"][0]["id"] == learned["memory_id"]
    stop_http_server(server)
    # One request is one transport: the SDK's "Terminating session: None" for each is not logged.
    assert not [line for line in server.log if "Terminating session" in line]
