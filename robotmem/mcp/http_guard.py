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
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["HttpGuard", "is_loopback_host"]

log = logging.getLogger("robotmem.mcp.http")


def is_loopback_host(host: str) -> bool:
    """``localhost``, 127.0.0.0/8 or ::1 (brackets allowed)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_without_port(host_header: str) -> str:
    if host_header.startswith("["):  # [::1]:8765
        return host_header[1 : host_header.find("]")] if "]" in host_header else host_header
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


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
        self._allowed_origins = {o.rstrip("/").lower() for o in allowed_origins}

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
        await _send_json(send, status, {"error": {"code": code, "field": None, "message": message}}, extra)

    def _refusal(self, headers: Headers) -> tuple[int, str, str] | None:
        origin = headers.get("origin")
        if origin is not None and not self._origin_allowed(origin):
            return 403, "forbidden", f"origin {origin!r} is not allowed"
        if self._check_host and not is_loopback_host(_host_without_port(headers.get("host", ""))):
            return 421, "misdirected", "this server answers loopback host names only"
        if self._token is not None and not self._authorized(headers.get("authorization")):
            return 401, "unauthorized", "missing or wrong bearer token (Authorization: Bearer <token>)"
        return None

    def _origin_allowed(self, origin: str) -> bool:
        if origin.rstrip("/").lower() in self._allowed_origins:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and is_loopback_host(parts.hostname or "")

    def _authorized(self, header: str | None) -> bool:
        assert self._token is not None
        scheme, _, credentials = (header or "").partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(credentials.strip().encode(), self._token)


async def _send_json(
    send: Send, status: int, body: dict[str, object], extra: list[tuple[bytes, bytes]]
) -> None:
    payload = json.dumps(body).encode()
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
