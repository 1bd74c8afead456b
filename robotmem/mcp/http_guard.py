"""ASGI guard in front of the streamable HTTP endpoint: Origin, Host and bearer token.

* Origin (MCP transport spec, against DNS rebinding): a request that carries an Origin
  header must come from a loopback origin or one allowed explicitly, else 403. Requests
  without Origin (every non-browser client) pass.
* Host: when bound to loopback, the Host header must name a loopback address, else 421.
  A rebinding page reaches 127.0.0.1 under its own host name, which this refuses.
* Token: when one is configured, every request needs ``Authorization: Bearer <token>``,
  else 401. The comparison is constant-time.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import re
from collections.abc import Iterable

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import brief

__all__ = ["HttpGuard", "is_loopback_host", "origin_key", "send_error"]

log = logging.getLogger("robotmem.mcp.http")


# host[:port], where host is a name, dotted IPv4 or a bracketed IPv6 literal. Parsed here
# rather than by a URL parser: lenient parsers read "http://[::1].evil.example" as ::1.
_HOST_PORT = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::[0-9]{1,5})?")
_ORIGIN = re.compile(r"(?P<scheme>https?)://(?P<hostport>[^/?#@]+)/?")


def is_loopback_host(host: str) -> bool:
    """``localhost``, 127.0.0.0/8 or ::1; an IPv6 address may be in brackets, IPv4 may not."""
    name = host.strip().lower()
    if name == "localhost":
        return True
    bracketed = name.startswith("[") and name.endswith("]")
    try:
        address = ipaddress.ip_address(name[1:-1] if bracketed else name)
    except ValueError:
        return False
    return address.is_loopback and (address.version == 6 or not bracketed)


def origin_key(origin: str) -> str:
    """An origin as allowed origins are compared: without a trailing slash, lower case."""
    return origin.rstrip("/").lower()


def _host_of(host_port: str) -> str | None:
    """The host of ``host[:port]``; None when the text is anything else."""
    match = _HOST_PORT.fullmatch(host_port.strip())
    return None if match is None else match.group("host")


def _origin_host(origin: str) -> str | None:
    """The host of an ``http(s)://host[:port]`` origin; None for anything else."""
    match = _ORIGIN.fullmatch(origin.strip())
    return None if match is None else _host_of(match.group("hostport"))


class HttpGuard:
    """Wraps an ASGI app; lifespan and other non-HTTP scopes pass through untouched."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        check_host: bool,
        allowed_origins: Iterable[str] = (),
    ) -> None:
        self.app = app
        self._token = token.encode() if token else None
        self._check_host = check_host
        self._allowed_origins = {origin_key(o) for o in allowed_origins}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refusal(headers)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, code, message = refusal
        log.warning("refused %s %s: %s", scope.get("method"), scope.get("path"), message)
        extra = [(b"www-authenticate", b'Bearer realm="robotmem"')] if status == 401 else []
        await send_error(send, status, code, message, extra)

    def _refusal(self, headers: Headers) -> tuple[int, str, str] | None:
        origin = headers.get("origin")
        if origin is not None and not self._origin_allowed(origin):
            return 403, "forbidden", f"origin {brief(origin)} is not allowed"
        if self._check_host and not is_loopback_host(_host_of(headers.get("host", "")) or ""):
            return 421, "misdirected", "this server answers loopback host names only"
        if self._token is not None and not self._authorized(headers.get("authorization")):
            return 401, "unauthorized", "missing or wrong bearer token (Authorization: Bearer <token>)"
        return None

    def _origin_allowed(self, origin: str) -> bool:
        if origin_key(origin) in self._allowed_origins:
            return True
        host = _origin_host(origin)
        return host is not None and is_loopback_host(host)

    def _authorized(self, header: str | None) -> bool:
        assert self._token is not None
        scheme, _, credentials = (header or "").partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(credentials.strip().encode(), self._token)


async def send_error(send: Send, status: int, code: str, message: str, extra: list[tuple[bytes, bytes]]) -> None:
    """Answer with robotmem's JSON error (``{"error": {"code", "field", "message"}}``) at the ASGI
    level, before the SDK has seen the request."""
    payload = json.dumps({"error": {"code": code, "field": None, "message": message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
