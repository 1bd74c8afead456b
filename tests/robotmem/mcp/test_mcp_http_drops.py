"""Clients that give up mid-call, over real HTTP: the server log gets one clear line per
dropped message, no traceback, and the server goes on answering.

An SDK client that gives up on a call sends ``notifications/cancelled`` and then DELETEs
its session. When the DELETE closes the session between the SDK answering the
notification with 202 and handing it to the session, the SDK used to log two tracebacks
(~60 lines). Whether that happens is a race, so the test provokes it with plain HTTP:
the notification and the DELETE sent at the same moment (in trials it hit 22 times in
30). Then SDK clients drop mid-call as in the audit, and one more checks the server
still answers.
"""

from __future__ import annotations

import logging
import re
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
WENT_AWAY = re.compile(
    r"WARNING mcp\.server\.streamable_http: client went away: session [0-9a-f]{32} was closed .*not delivered$"
)


async def _cancel_and_leave(client: httpx2.AsyncClient, url: str) -> None:
    started = await client.post(url, json=INITIALIZE, headers=HEADERS)
    session = {**HEADERS, "mcp-session-id": started.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    await client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(lambda: client.post(url, json=CANCELLED, headers=session))
        tasks.start_soon(lambda: client.delete(url, headers=session))


async def _sdk_client_gives_up(url: str, k: int) -> None:
    with anyio.move_on_after(0.3 + 0.1 * k):
        async with http_session(url) as session:
            await session.call_tool(
                "save_perception",
                {"description": f"dropped perception {k}", "perception_type": "visual", "data": {"img": [0.5] * FLOATS}},
            )


def _went_away(server: HttpServer) -> list[str]:
    return [line.rstrip("\n") for line in server.log if "client went away" in line]


@pytest.mark.anyio
async def test_dropped_clients_leave_one_line_each_and_no_traceback(http_server_factory: Any) -> None:
    server: HttpServer = http_server_factory(ROBOTMEM_EMBEDDINGS="off")
    async with httpx2.AsyncClient(timeout=60) as client:
        for _ in range(ATTEMPTS):
            await _cancel_and_leave(client, server.url)
            if _went_away(server):
                break
    for k in range(SDK_DROPS):
        await _sdk_client_gives_up(server.url, k)
    async with http_session(server.url) as session:
        found = await call_ok(session, "recall", {"query": "dropped perception", "n": 20, "min_relevance": 0})
    assert isinstance(found["count"], int)
    stop_http_server(server)
    log = "".join(server.log)
    assert "Traceback" not in log, log
    assert "Exception in ASGI application" not in log and "Error handling POST request" not in log, log
    went_away = _went_away(server)
    assert went_away, f"the session was never closed under a message in {ATTEMPTS} tries:\n{log}"
    for line in went_away:
        assert WENT_AWAY.search(line), line


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
