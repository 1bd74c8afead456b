"""A client that goes away mid-call: one log line, not two tracebacks.

When an SDK client gives up on a call (a timeout, a cancelled task) it sends
``notifications/cancelled`` and then DELETEs its session. The SDK answers the
notification with 202 first and only then hands it to the session; when the DELETE has
closed the session in between, that hand-over raises ``anyio.ClosedResourceError``, which
the SDK logs as "Error handling POST request" with a traceback and then answers with a
500 on the response it already completed, which uvicorn refuses with a second traceback
("Unexpected ASGI message 'http.response.start' sent, after response already
completed"). About 60 lines per dropped client; nothing was wrong with the server.

Two narrow pieces turn that into one line:

* :class:`DroppedClientGuard` (ASGI, outermost) drops a second response the app tries to
  start after its response completed, and a closed-stream error raised after that
  response, so uvicorn has nothing to complain about. Any other exception from the app
  (or a closed-stream error before any response) still reaches uvicorn, logged in full.
* :func:`install_dropped_client_filter` rewrites exactly the SDK record "Error handling
  POST request" whose exception is ``ClosedResourceError``/``BrokenResourceError`` (the
  session's stream was closed) into one WARNING naming the session. Every other SDK
  error keeps its traceback.

The HTTP server now runs the SDK's stateless mode (``transports.build_http_app``): no
session outlives its request, so no DELETE can close one under a message and the race
above no longer arises there. Both pieces stay as guards: they cost nothing, and the
guard's late-response rule holds for any app.
"""

from __future__ import annotations

import contextvars
import logging

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["DroppedClientGuard", "DroppedClientFilter", "install_dropped_client_filter"]

log = logging.getLogger("robotmem.mcp.http")

#: The SDK logger and message (mcp/server/streamable_http.py) this rewrites, and nothing else.
SDK_LOGGER = "mcp.server.streamable_http"
SDK_POST_ERROR = "Error handling POST request"
_CLOSED = (anyio.ClosedResourceError, anyio.BrokenResourceError)

_session: contextvars.ContextVar[str | None] = contextvars.ContextVar("robotmem_mcp_session", default=None)


def _session_of(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"mcp-session-id":
            return bytes(value).decode("latin-1")
    return None


class DroppedClientGuard:
    """Remembers the request's session (for the log line) and swallows a response the app
    starts after its response already completed."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        completed = False
        swallowing = False

        async def guarded_send(message: Message) -> None:
            nonlocal completed, swallowing
            kind = message["type"]
            if completed and kind == "http.response.start":
                swallowing = True
                log.debug(
                    "dropped a second response (status %s) to %s %s: the first was already sent",
                    message.get("status"), scope.get("method"), scope.get("path"),
                )
                return
            if swallowing and kind == "http.response.body":
                return
            await send(message)
            if kind == "http.response.body" and not message.get("more_body", False):
                completed = True

        token = _session.set(_session_of(scope))
        try:
            await self.app(scope, receive, guarded_send)
        except _CLOSED:
            # The SDK, after that failed hand-over, also passes the error on to the closed
            # session's stream and fails again. Raised after the answer went out, it is the
            # same dropped client; before that it is not, and uvicorn logs it in full.
            if not completed:
                raise
            log.debug("%s %s ended on a closed session stream after its response", scope.get("method"),
                      scope.get("path"))
        finally:
            _session.reset(token)


class DroppedClientFilter(logging.Filter):
    """On the SDK's streamable HTTP logger: the closed-session POST error becomes one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != SDK_POST_ERROR or not record.exc_info:
            return True
        exc = record.exc_info[1]
        if not isinstance(exc, _CLOSED):
            return True
        session = _session.get()
        record.msg = (
            "client went away: session %s was closed (the client ended it or disconnected) while "
            "its message was on the way in; the message was not delivered"
        )
        record.args = (session or "(none)",)
        record.levelno = logging.WARNING
        record.levelname = logging.getLevelName(logging.WARNING)
        record.exc_info = None
        record.exc_text = None
        return True


def install_dropped_client_filter() -> None:
    """Idempotent: one filter on the SDK's streamable HTTP logger."""
    logger = logging.getLogger(SDK_LOGGER)
    if not any(isinstance(f, DroppedClientFilter) for f in logger.filters):
        logger.addFilter(DroppedClientFilter())
