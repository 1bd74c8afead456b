"""Clients that give up mid-call, over real HTTP: no traceback in the server log, and the
server goes on answering.

An SDK client that gives up on a call sends ``notifications/cancelled`` and then, if it
has a session, DELETEs it. When the server kept sessions, a DELETE that closed the
session between the SDK answering the notification with 202 and handing it over made the
SDK log two tracebacks (~60 lines); the HTTP server is stateless now (see transports), so
there is no session to close under a message. The test still sends the notification and
a DELETE at the same moment, as a client written for sessions would, then lets SDK
clients drop mid-call as in the audit, and one more checks the server still answers.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import httpx2
import pytest
from mcp_client_helpers import HttpServer, call_ok, http_session, stop_http_server
from starlette.types import Receive, Scope, Send

from robotmem.mcp.client_drops import SDK_LOGGER, SDK_POST_ERROR, DroppedClientFilter, DroppedClientGuard

ATTEMPTS = 30
SDK_DROPS = 3
FLOATS = 300_000  # 3.6 MB of JSON: the call takes long enough to be given up
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "drop-test", "version": "0"}},
}
CANCELLED = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "gave up"}}


async def _cancel_and_leave(client: httpx2.AsyncClient, url: str) -> None:
    started = await client.post(url, json=INITIALIZE, headers=HEADERS)
    assert started.status_code == 200 and "mcp-session-id" not in started.headers
    request = {**HEADERS, "mcp-protocol-version": "2025-06-18"}
    await client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=request)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(lambda: client.post(url, json=CANCELLED, headers=request))
        tasks.start_soon(lambda: client.delete(url, headers=request))


async def _sdk_client_gives_up(url: str, k: int) -> None:
    with anyio.move_on_after(0.3 + 0.1 * k):
        async with http_session(url) as session:
            await session.call_tool(
                "save_perception",
                {"description": f"dropped perception {k}", "perception_type": "visual", "data": {"img": [0.5] * FLOATS}},
            )


@pytest.mark.anyio
async def test_dropped_clients_leave_no_traceback(http_server_factory: Any) -> None:
    server: HttpServer = http_server_factory(ROBOTMEM_EMBEDDINGS="off")
    async with httpx2.AsyncClient(timeout=60) as client:
        for _ in range(ATTEMPTS):
            await _cancel_and_leave(client, server.url)
    for k in range(SDK_DROPS):
        await _sdk_client_gives_up(server.url, k)
    async with http_session(server.url) as session:
        found = await call_ok(session, "recall", {"query": "dropped perception", "n": 20, "min_relevance": 0})
    assert isinstance(found["count"], int)
    stop_http_server(server)
    log = "".join(server.log)
    assert "Traceback" not in log, log
    assert "Exception in ASGI application" not in log and "Error handling POST request" not in log, log
    assert "client went away" not in log, log


# -- dropped clients -------------------------------------------------------------------------


async def _answers_twice_then_fails_on_a_closed_stream(scope: Scope, receive: Receive, send: Send) -> None:
    # What the SDK does when a session closes between its 202 and handing the message over.
    await send({"type": "http.response.start", "status": 202, "headers": []})
    await send({"type": "http.response.body", "body": b""})
    await send({"type": "http.response.start", "status": 500, "headers": []})
    await send({"type": "http.response.body", "body": b"Error handling POST request"})
    raise anyio.ClosedResourceError


async def _fails_before_answering(scope: Scope, receive: Receive, send: Send) -> None:
    raise anyio.ClosedResourceError


@pytest.mark.anyio
async def test_a_late_second_response_and_closed_stream_after_the_answer_are_swallowed() -> None:
    async with _asgi_client(DroppedClientGuard(_answers_twice_then_fails_on_a_closed_stream)) as client:
        response = await client.post("/mcp", content=b"{}")
    assert response.status_code == 202 and response.content == b""


@pytest.mark.anyio
async def test_a_closed_stream_before_any_answer_is_a_real_error() -> None:
    async with _asgi_client(DroppedClientGuard(_fails_before_answering)) as client:
        with pytest.raises(anyio.ClosedResourceError):
            await client.post("/mcp", content=b"{}")


def _record(message: str, exc: BaseException | None) -> logging.LogRecord:
    exc_info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    return logging.LogRecord(SDK_LOGGER, logging.ERROR, __file__, 1, message, None, exc_info)


def test_the_closed_session_post_error_becomes_one_warning_line() -> None:
    record = _record(SDK_POST_ERROR, anyio.ClosedResourceError())
    assert DroppedClientFilter().filter(record)
    formatted = logging.Formatter("%(levelname)s %(name)s: %(message)s").format(record)
    assert formatted.count("\n") == 0 and "Traceback" not in formatted
    assert formatted.startswith("WARNING mcp.server.streamable_http: client went away: session")


@pytest.mark.parametrize(
    "message, exc",
    [(SDK_POST_ERROR, RuntimeError("boom")), (SDK_POST_ERROR, None), ("Error in message router", anyio.ClosedResourceError())],
)
def test_other_sdk_errors_keep_their_level_and_traceback(message: str, exc: BaseException | None) -> None:
    record = _record(message, exc)
    assert DroppedClientFilter().filter(record)
    assert record.levelno == logging.ERROR and record.msg == message
    assert (record.exc_info is None) == (exc is None)


def _asgi_client(app: Any) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1:8765")
