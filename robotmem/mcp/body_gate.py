"""Bounds the memory that large HTTP request bodies can cost: one is parsed at a time.

The SDK reads a POST body whole and parses it into Python objects before any tool sees
it; a JSON array of numbers costs several times its text as objects (measured: a 45 MiB
body of 4M floats, about 400 MB in the server until it is refused; docs/mcp.md). The
body cap (``max_request_body_size``) bounds one request; this gate bounds how many such
requests are inside the server at once, so the server's peak is one large body's worth,
whatever the number of clients:

* a POST whose Content-Length is at most ``threshold`` bytes passes untouched;
* a larger one (or one without a Content-Length: its size is unknown) waits for the
  single slot. The body stays unread while it waits: uvicorn stops reading a socket
  whose body the app has not asked for (64 KiB buffered), so a waiting client costs
  next to nothing;
* a request that waits longer than ``max_wait_s``, or finds ``max_waiting`` already
  waiting, gets 503 with ``Retry-After``, and can send again later;
* a body declared larger than the cap passes straight on: the SDK refuses it with 413
  without reading it;
* a body that stalls (no bytes for ``body_idle_s``: a robot that lost its network
  mid-upload leaves a half-open connection that may stay silent for hours) is dropped
  with 408, so it cannot hold the slot.

After a large request the heap is trimmed (glibc ``malloc_trim``) so the memory its
objects took goes back to the system instead of staying with the process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import math
from collections.abc import Callable

import anyio
import anyio.lowlevel
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config import Config
from .http_guard import send_error

__all__ = ["LargeBodyGate", "configure_heap", "release_heap", "request_body_limit"]

log = logging.getLogger("robotmem.mcp.http")


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


def _glibc_function(name: str, *argtypes: type[ctypes.c_int] | type[ctypes.c_size_t]) -> Callable[..., int] | None:
    libc = _libc()
    function = getattr(libc, name, None) if libc is not None else None
    if function is None:  # not glibc (musl, macOS): nothing to tune
        return None
    function.argtypes = list(argtypes)
    function.restype = ctypes.c_int
    return function  # type: ignore[no-any-return]


_MALLOC_TRIM = _glibc_function("malloc_trim", ctypes.c_size_t)
_MALLOPT = _glibc_function("mallopt", ctypes.c_int, ctypes.c_int)
_M_MMAP_THRESHOLD = -3
#: Allocations from this size up get their own mapping, returned to the system when freed.
MMAP_THRESHOLD_BYTES = 1024 * 1024


def configure_heap() -> bool:
    """Fix glibc's mmap threshold at 1 MiB (False where the C library has no mallopt).

    glibc raises the threshold each time a large block is freed (up to 32 MiB), so after
    one large request the next one's arrays (a 4M-item list is 32 MB) come from the heap
    proper, where freed space stays with the process. Measured: three refused 45 MiB
    requests in a row grew the server 815 -> 1003 -> 1191 MB. A fixed threshold keeps
    large blocks in their own mappings, which go back to the system when freed.
    """
    if _MALLOPT is None:
        return False
    return bool(_MALLOPT(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))


def release_heap() -> bool:
    """Give free heap memory back to the system; False where the C library cannot."""
    if _MALLOC_TRIM is None:
        return False
    _MALLOC_TRIM(0)
    return True


class LargeBodyGate:
    """Wraps an ASGI app; lets at most one POST with a body over ``threshold`` in at a time."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        threshold: int,
        body_cap: int,
        max_wait_s: float = 30.0,
        max_waiting: int = 8,
        body_idle_s: float = 30.0,
        trim: Callable[[], object] = release_heap,
    ) -> None:
        self.app = app
        self.threshold = threshold
        self.body_cap = body_cap
        self.max_wait_s = max_wait_s
        self.max_waiting = max_waiting
        self.body_idle_s = body_idle_s
        self._trim = trim
        self._slot: anyio.Lock | None = None  # made in the serving event loop, on first use
        self.waiting = 0
        #: Large requests that were let in, and the most that were inside at once (tests read these).
        self.admitted = 0
        self.inside = 0
        self.most_inside = 0

    def _is_large(self, scope: Scope) -> bool:
        if scope.get("method") != "POST":
            return False
        declared = Headers(scope=scope).get("content-length")
        if declared is None:
            return True  # chunked: size unknown until read
        try:
            size = int(declared)
        except ValueError:
            return True
        # Over the cap: the SDK answers 413 without reading the body, so no need to wait.
        return self.threshold < size <= self.body_cap

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._is_large(scope):
            await self.app(scope, receive, send)
            return
        if self._slot is None:
            self._slot = anyio.Lock()
        if not await self._take_slot(self._slot, send):
            return
        self.admitted += 1
        self.inside += 1
        self.most_inside = max(self.most_inside, self.inside)
        stalled = False
        try:
            with anyio.CancelScope() as app_scope:
                body_done = False

                async def receive_with_deadline() -> Message:
                    # Only while the body comes in: afterwards the app's receive() waits for
                    # a disconnect during the whole response, which is no stall.
                    nonlocal body_done, stalled
                    if body_done:
                        return await receive()
                    with anyio.move_on_after(self.body_idle_s):
                        message = await receive()
                        body_done = message["type"] != "http.request" or not message.get("more_body", False)
                        return message
                    stalled = True
                    app_scope.cancel()  # the SDK is still reading the body: nothing was dispatched
                    await anyio.lowlevel.checkpoint()
                    raise AssertionError("unreachable: the scope was cancelled")  # pragma: no cover

                await self.app(scope, receive_with_deadline, send)
        finally:
            self.inside -= 1
            self._slot.release()
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._trim)
        if stalled:
            log.warning("large request dropped: no body bytes for %g s (a stalled or vanished client)",
                        self.body_idle_s)
            stalled_for = f"the request body stalled: no bytes for {self.body_idle_s:g} s"
            await _refuse(send, 408, "request_timeout", stalled_for, [])

    async def _take_slot(self, slot: anyio.Lock, send: Send) -> bool:
        """Wait for the slot; False (and a 503 sent) when the queue is full or the wait too long."""
        try:
            slot.acquire_nowait()
            return True
        except anyio.WouldBlock:
            pass
        if self.waiting >= self.max_waiting:
            await self._busy(send, f"{self.waiting} large requests are already waiting")
            return False
        acquired = False
        self.waiting += 1
        try:
            with anyio.move_on_after(self.max_wait_s):
                await slot.acquire()
                acquired = True
        finally:
            self.waiting -= 1
        if not acquired:
            await self._busy(send, f"no slot for a large request within {self.max_wait_s:g} s")
        return acquired

    async def _busy(self, send: Send, why: str) -> None:
        retry_after = max(1, math.ceil(self.max_wait_s / 6))
        log.warning("large request refused with 503: %s", why)
        message = (
            "the server is parsing another large request; only one body over "
            f"{self.threshold} bytes is handled at a time. Retry after {retry_after} s."
        )
        await _refuse(send, 503, "busy", message, [(b"retry-after", str(retry_after).encode())])


async def _refuse(send: Send, status: int, code: str, message: str, extra: list[tuple[bytes, bytes]]) -> None:
    # The body was never read: the connection closes after the answer instead of reading it on.
    await send_error(send, status, code, message, [(b"connection", b"close"), *extra])


def request_body_limit(config: Config) -> int:
    """The largest POST body read: room for a payload of ``max_payload_bytes`` as JSON.

    Numeric arrays are stored as 8-byte numbers; as JSON text a float64 takes 2 to 25
    characters with its comma (``0,`` to ``-2.2250738585072014e-308,``): 19-20 for typical
    full-precision readings (2.4-2.5x), at most 3.125x. 3x passes any realistic payload at
    the limit, so Memory gives its clear "too large" error rather than a bare 413.
    """
    return max(DEFAULT_MAX_REQUEST_BODY_SIZE, 3 * config.max_payload_bytes)
