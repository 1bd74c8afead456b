"""Running the server: stdio (the MCP default) or streamable HTTP at ``/mcp``.

Logs go to stderr only: on stdio, stdout carries the protocol and one stray byte there
breaks the client.
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
from collections.abc import Sequence

import anyio
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config import Config
from ..errors import ConfigError
from .body_gate import LargeBodyGate, configure_heap, request_body_limit
from .client_drops import SDK_LOGGER, DroppedClientGuard, install_dropped_client_filter
from .http_guard import HttpGuard, is_loopback_host, send_error
from .server import build_server

__all__ = [
    "LARGE_BODY_BYTES",
    "MCP_PATH",
    "check_http_binding",
    "configure_logging",
    "request_body_limit",
    "run_http",
    "run_stdio",
]

log = logging.getLogger("robotmem.mcp")
MCP_PATH = "/mcp"
#: POST bodies over this many bytes are parsed one at a time (LargeBodyGate): a 1 MiB
#: body costs ~7 MB as Python objects, so smaller ones run side by side freely.
LARGE_BODY_BYTES = 1024 * 1024


def configure_logging(level: int = logging.INFO) -> None:
    """Plain lines on stderr; set before the SDK would install its own handler."""
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True
    )
    # faiss's loader tells at INFO of every CPU build it could not load ("Could not load library
    # with AVX512 support") before the one it does: at every start, since the warm-up imports it.
    logging.getLogger("faiss.loader").setLevel(max(level, logging.WARNING))


async def _cancel_on_termination(scope: anyio.CancelScope) -> None:
    # SIGTERM (what an MCP client sends to a server that lingers) ends the serve loop so
    # the lifespan can close the store instead of the process dying mid-write.
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            log.info("termination signal received, shutting down")
            scope.cancel()
            return


def run_stdio(config: Config | None = None) -> bool:
    """Serve on stdio until stdin ends, SIGTERM or Ctrl-C; True if it ended because the
    client closed stdout (the CLI exits 141 for that, as for any closed stdout)."""
    server = build_server(config)
    configure_heap()  # as over HTTP: the blocks of a large line go back to the system once freed

    async def serve() -> None:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_cancel_on_termination, tasks.cancel_scope)
            await server.run_stdio_async()
            tasks.cancel_scope.cancel()

    anyio.run(serve)
    return server.stdout_closed


def check_http_binding(host: str, token: str | None) -> None:
    """Refuse to expose the memory beyond this machine without a token."""
    # a token of spaces only is no token: a header of "Bearer" and spaces matched it
    if not is_loopback_host(host) and not (token and token.strip()):
        raise ConfigError(
            f"refusing to serve on {host} without a token: anyone who can reach it could read and "
            'change the memory. Set ROBOTMEM_TOKEN (or "token" in config.json), or bind 127.0.0.1.'
        )


#: What the SDK logs (INFO) as it ends the transport of every stateless request: one line
#: per tool call, nothing a reader of the log could act on.
_STATELESS_END = "Terminating session: None"


class _PerRequestEndFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != _STATELESS_END


def _quiet_per_request_ends() -> None:
    logger = logging.getLogger(SDK_LOGGER)
    if not any(isinstance(f, _PerRequestEndFilter) for f in logger.filters):
        logger.addFilter(_PerRequestEndFilter())


class _NoStandaloneStream:
    """``GET /mcp`` is answered 405, as the transport spec allows a server without one.

    Stateless, the SDK still opens an SSE stream for a GET and holds it until the client
    closes it; robotmem never writes to it, so one from a client that lost power (no FIN)
    would hold a socket and ~85 KB for as long as the host lives. The SDK's client opens
    none without a session id; other clients take 405 as "no stream here".
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            await send_error(
                send, 405, "method_not_allowed",
                f"this server sends nothing outside a request's answer, so GET {MCP_PATH} opens no stream; "
                "POST requests to it", [(b"allow", b"POST")],
            )
            return
        await self.app(scope, receive, send)


def build_http_app(config: Config, host: str, allowed_origins: Sequence[str] = ()) -> ASGIApp:
    server = build_server(config)
    _quiet_per_request_ends()
    # The SDK's own Host/Origin checks are switched off: HttpGuard does both, for any bind
    # address, with our error bodies.
    body_cap = request_body_limit(config)
    # Stateless: every POST is served on its own and nothing outlives it. A stateful
    # session (~41 KB) lived until DELETE or 30 min idle, and clients that vanish (a robot
    # losing power never sends DELETE) filled the SDK's 10,000-session cap, after which
    # every new client got 503 for half an hour; the SDK refuses at the cap rather than
    # evicting. robotmem needs nothing a session keeps: no server-to-client requests
    # (sampling, elicitation), no notifications outside a call's own response, no
    # resumability, no per-client state (episodes are the `session_id` tool argument).
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=host,
        stateless_http=True,
        max_request_body_size=body_cap,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    # Outermost first: refused callers (token, Origin) never take the large-body slot; a
    # dropped client's late response is swallowed before uvicorn sees it.
    gated = LargeBodyGate(_NoStandaloneStream(app), threshold=LARGE_BODY_BYTES, body_cap=body_cap)
    guarded = HttpGuard(
        gated, token=config.token, check_host=is_loopback_host(host), allowed_origins=allowed_origins
    )
    return DroppedClientGuard(guarded)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.listen(128)
    return sock


class _AnnounceWhenStarted:
    """Logs the URL once the app finished starting (port 0 resolves to the real port)."""

    def __init__(self, app: ASGIApp, url: str) -> None:
        self.app = app
        self.url = url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def announcing_send(message: Message) -> None:
            await send(message)
            if message["type"] == "lifespan.startup.complete":
                log.info("robotmem MCP server listening on %s", self.url)

        await self.app(scope, receive, announcing_send)


def run_http(config: Config, host: str, port: int, allowed_origins: Sequence[str] = ()) -> None:
    import uvicorn

    check_http_binding(host, config.token)
    sock = _bind(host, port)
    bound_port = sock.getsockname()[1]
    shown_host = f"[{host.strip('[]')}]" if ":" in host else host
    app = _AnnounceWhenStarted(
        build_http_app(config, host, allowed_origins), f"http://{shown_host}:{bound_port}{MCP_PATH}"
    )
    if not config.token:
        log.warning("no token configured: any local process can use this server (set ROBOTMEM_TOKEN)")
    install_dropped_client_filter()
    configure_heap()
    uvicorn_config = uvicorn.Config(app, log_level="info", access_log=False, lifespan="on")
    uvicorn.Server(uvicorn_config).run(sockets=[sock])
