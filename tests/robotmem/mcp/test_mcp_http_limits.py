"""Memory bounds and dropped clients on the HTTP transport.

* LargeBodyGate: at most one body over the threshold inside the server at a time; others
  wait, or get 503 with Retry-After; small bodies are never held up.
* release_tool_arguments: a refused call's arguments do not outlive its answer.
* forget_traceback: an answered exception does not keep the call's arguments alive.
"""

from __future__ import annotations

import gc
import sys
import weakref
from typing import Any

import anyio
import httpx2
import pytest
from starlette.types import Receive, Scope, Send

from mcp.server.context import ServerRequestContext

from robotmem.errors import ValidationError
from robotmem.mcp.body_gate import LargeBodyGate, release_heap
from robotmem.mcp.boundary import forget_traceback, result_for_exception
from robotmem.mcp.server import release_tool_arguments

THRESHOLD = 1000
CAP = 100_000


class _SlowApp:
    """Reads the body, then holds the request until released; counts who is inside."""

    def __init__(self) -> None:
        self.inside = 0
        self.most_inside = 0
        self.release = anyio.Event()
        self.entered = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.inside += 1
        self.entered += 1
        self.most_inside = max(self.most_inside, self.inside)
        try:
            more = True
            while more:
                message = await receive()
                more = message.get("more_body", False)
            await self.release.wait()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})
        finally:
            self.inside -= 1


def _client(app: Any) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1:8765")


def _gate(app: Any, trims: list[int], **kw: Any) -> LargeBodyGate:
    return LargeBodyGate(app, threshold=THRESHOLD, body_cap=CAP, trim=lambda: trims.append(1), **kw)


@pytest.mark.anyio
async def test_large_bodies_enter_one_at_a_time_and_small_ones_pass_alongside() -> None:
    inner = _SlowApp()
    trims: list[int] = []
    gate = _gate(inner, trims)
    statuses: list[int] = []
    async with _client(gate) as client:

        async def post(size: int) -> None:
            statuses.append((await client.post("/mcp", content=b"x" * size)).status_code)

        async with anyio.create_task_group() as tasks:
            for _ in range(3):
                tasks.start_soon(post, 5000)
            for _ in range(3):
                tasks.start_soon(post, 10)
            # Wait until nothing more gets in: one large one and the three small ones.
            with anyio.fail_after(10):
                while inner.entered < 4 or gate.waiting < 2:
                    await anyio.sleep(0.01)
            assert inner.inside == 4 and gate.inside == 1
            inner.release.set()
    assert statuses == [200] * 6
    assert gate.admitted == 3 and gate.most_inside == 1
    assert inner.most_inside == 4  # the small ones were never held up by the large one
    assert len(trims) == 3  # the heap is trimmed after each large request


@pytest.mark.anyio
async def test_a_large_body_that_waits_too_long_gets_503_with_retry_after() -> None:
    inner = _SlowApp()
    gate = _gate(inner, [], max_wait_s=0.2)
    async with _client(gate) as client:
        async with anyio.create_task_group() as tasks:
            first: list[int] = []

            async def hold() -> None:
                first.append((await client.post("/mcp", content=b"x" * 5000)).status_code)

            tasks.start_soon(hold)
            with anyio.fail_after(10):
                while gate.inside < 1:
                    await anyio.sleep(0.01)
            second = await client.post("/mcp", content=b"y" * 5000)
            inner.release.set()
    assert first == [200]
    assert second.status_code == 503
    assert int(second.headers["retry-after"]) >= 1
    error = second.json()["error"]
    assert error["code"] == "busy" and "one body over 1000 bytes" in error["message"]
    assert gate.admitted == 1


@pytest.mark.anyio
async def test_when_the_queue_is_full_a_large_body_is_refused_at_once() -> None:
    inner = _SlowApp()
    gate = _gate(inner, [], max_waiting=1)
    statuses: list[int] = []
    async with _client(gate) as client:

        async def post() -> None:
            statuses.append((await client.post("/mcp", content=b"x" * 5000)).status_code)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(post)
            tasks.start_soon(post)
            with anyio.fail_after(10):
                while gate.inside < 1 or gate.waiting < 1:
                    await anyio.sleep(0.01)
            refused = await client.post("/mcp", content=b"z" * 5000)
            inner.release.set()
    assert refused.status_code == 503 and "retry-after" in refused.headers
    assert sorted(statuses) == [200, 200]


@pytest.mark.anyio
async def test_a_body_declared_over_the_cap_is_not_queued() -> None:
    # The SDK refuses it with 413 before reading it; queueing it would only delay that.
    inner = _SlowApp()
    inner.release.set()
    gate = _gate(inner, [])
    async with _client(gate) as client:
        response = await client.post("/mcp", content=b"x" * (CAP + 1))
    assert response.status_code == 200 and gate.admitted == 0


def test_release_heap_runs_where_glibc_is() -> None:
    released = release_heap()
    assert released or not sys.platform.startswith("linux")


# -- arguments released after the answer ------------------------------------------------------


def _context(method: str, params: dict[str, Any]) -> ServerRequestContext[Any, Any]:
    return ServerRequestContext(session=None, lifespan_context={}, protocol_version="2025-06-18",  # type: ignore[arg-type]
                                method=method, params=params)


@pytest.mark.anyio
@pytest.mark.parametrize("fails", [False, True])
async def test_a_tool_calls_arguments_are_dropped_from_the_request_once_answered(fails: bool) -> None:
    # The SDK's receive loop keeps the last request it received until the next arrives: its
    # params must not keep a (possibly huge, refused) payload alive in an idle session.
    payload = {"x": [0.5] * 1000}
    params: dict[str, Any] = {"name": "save_perception", "arguments": {"description": "big one", "data": payload}}
    seen: list[Any] = []

    async def handler(ctx: ServerRequestContext[Any, Any]) -> Any:
        assert ctx.params is not None
        seen.append(ctx.params["arguments"]["data"])
        if fails:
            raise RuntimeError("refused")
        return {"content": []}

    if fails:
        with pytest.raises(RuntimeError):
            await release_tool_arguments(_context("tools/call", params), handler)
    else:
        assert await release_tool_arguments(_context("tools/call", params), handler) == {"content": []}
    assert seen == [payload]  # the handler saw them
    assert params == {"name": "save_perception"}


@pytest.mark.anyio
async def test_other_requests_keep_their_params() -> None:
    params: dict[str, Any] = {"uri": "robotmem://stats", "arguments": "kept"}

    async def handler(ctx: ServerRequestContext[Any, Any]) -> Any:
        return {}

    await release_tool_arguments(_context("resources/read", params), handler)
    assert params == {"uri": "robotmem://stats", "arguments": "kept"}


# -- a refused call's arguments are not kept alive by its exception ----------------------------


class _Payload:
    """Stands in for a parsed payload (lists cannot be weakly referenced)."""


def _refused_call(payload: _Payload) -> None:
    raise ValidationError("data is 32000020 bytes encoded; the limit is 16777216 bytes", field="data")


def _answer_a_refused_call(payload: _Payload) -> Any:
    try:
        _refused_call(payload)
    except ValidationError as exc:
        # A frame on the traceback refers back to the exception (anyio's worker thread does
        # so through its future): exception -> traceback -> frames -> exception.
        kept = exc  # noqa: F841
        return result_for_exception("save_perception", exc)


def test_an_answered_exception_does_not_keep_the_call_arguments_alive() -> None:
    payload = _Payload()
    alive = weakref.ref(payload)
    gc.disable()  # only reference counting: a cycle would keep the payload until a full collection
    try:
        result = _answer_a_refused_call(payload)
        del payload
        assert alive() is None
    finally:
        gc.enable()
    assert result.is_error and result.structured_content["error"]["field"] == "data"


def test_forget_traceback_clears_causes_and_contexts() -> None:
    try:
        try:
            raise KeyError("inner")
        except KeyError as inner:
            raise RuntimeError("outer") from inner
    except RuntimeError as outer:
        caught = outer
    assert caught.__traceback__ is not None and caught.__cause__ is not None
    forget_traceback(caught)
    assert caught.__traceback__ is None and caught.__cause__.__traceback__ is None


@pytest.mark.anyio
async def test_a_stalled_large_body_is_dropped_with_408_and_frees_the_slot() -> None:
    # A robot that loses its network mid-upload leaves a silent connection: it must not
    # hold the one slot for large bodies.
    inner = _SlowApp()
    inner.release.set()
    gate = _gate(inner, [], body_idle_s=0.2)

    async def stalls() -> Any:
        yield b"x" * 2000
        await anyio.sleep(30)
        yield b"never"

    async with _client(gate) as client:
        with anyio.fail_after(10):
            stalled = await client.post("/mcp", content=stalls(), headers={"content-length": "5000"})
            after = await client.post("/mcp", content=b"y" * 5000)
    assert stalled.status_code == 408 and stalled.json()["error"]["code"] == "request_timeout"
    assert after.status_code == 200 and after.text == "ok"
    assert gate.admitted == 2 and gate.inside == 0
