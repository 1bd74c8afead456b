"""The ASGI app: static page + JSON API, behind the same guard as the HTTP MCP server."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Hashable
from importlib.resources import files
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_to_bytes

from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import NotFoundError, RobotMemError, ValidationError, brief
from ..payload import replace_non_finite
from ..mcp.http_guard import HttpGuard, is_loopback_host, origin_key
from ..view import episode_detail, episode_list, episode_timeline, latest_map

if TYPE_CHECKING:  # pragma: no cover
    from ..service import Memory

__all__ = ["MAX_BUILDS", "SECURITY_HEADERS", "BuildGate", "build_app"]

log = logging.getLogger(__name__)

_STATUS = {ValidationError: 400, NotFoundError: 404}

#: Episode pages (detail, timeline) built at once, over all episodes. One build of a long episode
#: reads hundreds of MB; a page that re-polled without waiting once had a dozen in flight.
MAX_BUILDS = 2
#: Seconds a refused caller is told to wait (Retry-After of the 503).
RETRY_AFTER_S = 2

#: Sent with every answer, page and API: no MIME sniffing, no framing, nothing loaded from elsewhere
#: (the page is one script and one style sheet of this server; images are data: URLs it builds).
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
}


class _Busy(Exception):
    """Every build slot is taken: the caller gets 503 and Retry-After."""


class _Flight:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.body: bytes | None = None
        self.error: BaseException | None = None


class BuildGate:
    """Single flight per key and a bound across keys for the heavy episode builds.

    Concurrent requests for the same key (the same episode page) wait for the one build in
    progress and share its rendered JSON; a new key starts a build only while fewer than
    ``limit`` run, else :class:`_Busy`. Nothing is cached past the build: the next request reads
    the store afresh (a bridge may be writing). ``builds`` counts the builds started (tests)."""

    def __init__(self, limit: int = MAX_BUILDS) -> None:
        self._lock = threading.Lock()
        self._flights: dict[Hashable, _Flight] = {}
        self._slots = threading.BoundedSemaphore(limit)
        self.builds = 0

    def run(self, key: Hashable, build: Callable[[], bytes]) -> bytes:
        with self._lock:
            flight = self._flights.get(key)
            leader = flight is None
            if flight is None:
                if not self._slots.acquire(blocking=False):
                    raise _Busy()
                flight = self._flights[key] = _Flight()
                self.builds += 1
        if not leader:
            flight.done.wait()
        else:
            try:
                flight.body = build()
            except BaseException as exc:  # shared with the waiters, raised in each
                flight.error = exc
            finally:
                with self._lock:
                    del self._flights[key]
                self._slots.release()
                flight.done.set()
        if flight.error is not None:
            raise flight.error
        assert flight.body is not None
        return flight.body


def _render(content: Any) -> bytes:
    try:
        return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    except ValueError:  # a NaN or inf somewhere
        # JSON has no NaN: sent as null (a NaN a bridge stored in a context made the whole answer a 500)
        finite = replace_non_finite(content, lambda _: None)
        return json.dumps(finite, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def _json(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def _internal(exc: BaseException) -> JSONResponse:
    """The safety net: an unexpected failure answers JSON too (logged with its traceback here)."""
    log.error("robotmem ui: unexpected error", exc_info=exc)
    return JSONResponse({"error": {"code": "internal_error", "message": f"internal error ({type(exc).__name__}); "
                                                                        "see the server's log"}}, status_code=500)


def _answered(produce: Callable[[], bytes]) -> Response:
    """The JSON body ``produce`` renders, or the error it ran into as JSON: never Starlette's
    text/plain 500."""
    try:
        return _json(produce())
    except _Busy:
        return JSONResponse({"error": {"code": "busy", "message": "the server is building other episode pages; "
                                                                  f"retry in {RETRY_AFTER_S} s"}},
                            status_code=503, headers={"Retry-After": str(RETRY_AFTER_S)})
    except RobotMemError as exc:
        return _error(exc)
    except Exception as exc:  # noqa: BLE001 - the safety net
        return _internal(exc)


def _error(exc: RobotMemError) -> JSONResponse:
    status = next((code for kind, code in _STATUS.items() if isinstance(exc, kind)), 500)
    return JSONResponse({"error": exc.to_dict()}, status_code=status)


def _params(request: Request, allowed: tuple[str, ...]) -> dict[str, str]:
    """The query's parameters, each named in ``allowed``, given once and in UTF-8. Starlette
    ignores an unknown name (``pgae=3`` opened the first page, ``query=`` recalled nothing),
    keeps the last of a repeated one (``n=1&n=2``) and turns bytes that are not UTF-8 into U+FFFD
    (``q=%ff`` recalled "\ufffd"): each is refused here naming the parameter."""
    found: dict[str, str] = {}
    for part in request.scope.get("query_string", b"").split(b"&"):
        if not part:
            continue
        raw_name, _, raw_value = part.partition(b"=")
        name = unquote_to_bytes(raw_name.replace(b"+", b" ")).decode("utf-8", "replace")
        if name not in allowed:
            listed = ", ".join(allowed) if allowed else "none"
            raise ValidationError(f"unknown parameter {brief(name)}; this path takes: {listed}", field=name)
        if name in found:
            raise ValidationError(f"{name} is given more than once", field=name)
        try:
            found[name] = unquote_to_bytes(raw_value.replace(b"+", b" ")).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(f"{name} is not UTF-8 text (percent-encode its UTF-8 bytes)", field=name) from exc
    return found


def _number(query: dict[str, str], name: str) -> float | None:
    text = query.get(name)
    if text in (None, ""):
        return None
    try:
        return float(text)
    except ValueError as exc:
        raise ValidationError(f"{name} must be a number, not {text[:40]!r}", field=name) from exc


def _whole(text: str, name: str) -> int:
    """A whole-number query or path parameter: ASCII digits only, an optional leading '-' (for
    robotmem.validation to refuse a negative with its own message). Python's int() also reads
    "1_0" as 10 and Arabic-Indic or full-width digits and padding spaces as numbers; a mistyped
    address must not quietly open another page or memory."""
    digits = text[1:] if text.startswith("-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        raise ValidationError(f"{name} must be a whole number written in ASCII digits, not {text[:40]!r}", field=name)
    return int(text)


def _near(query: dict[str, str]) -> dict[str, Any] | None:
    text = query.get("near")
    if not text:
        return None
    try:
        target = [float(v) for v in text.split(",")]
    except ValueError as exc:
        raise ValidationError("near takes numbers separated by commas, e.g. 1.5,-2", field="near") from exc
    spatial: dict[str, Any] = {"field": query.get("field") or "spatial.position", "target": target}
    max_distance = _number(query, "max_distance")
    if max_distance is not None:
        spatial["max_distance"] = max_distance
    return spatial


async def _no_such_path(request: Request, exc: Exception) -> Response:
    """An unknown /api path gets the documented JSON error too, not Starlette's plain text."""
    return _error(NotFoundError(f"no API path {request.url.path}"))


async def _wrong_method(request: Request, exc: Exception) -> Response:
    """The API only reads: anything but GET (and HEAD) is a JSON 405, as every other API error."""
    return JSONResponse({"error": {"code": "method_not_allowed", "field": None,
                                   "message": f"{request.method} is not allowed; the API answers GET only"}},
                        status_code=405, headers={"Allow": "GET, HEAD"})


async def _unexpected(request: Request, exc: Exception) -> Response:
    return _internal(exc)


Handler = Callable[[Request, dict[str, str]], Any]


class _Api:
    """Handlers; each reads the store afresh (a bridge may be writing right now)."""

    def __init__(self, mem: Memory, gate: BuildGate | None = None) -> None:
        self.mem = mem
        self.gate = gate or BuildGate()
        # Timeline lines have a gate of their own: reading 500 of an episode's lines takes a
        # fraction of a second where its paths and plots (100,000 pose chunks) took 9 s, and the
        # lines waited behind those builds.
        self.timeline_gate = BuildGate()

    def routes(self) -> list[Route]:
        return [
            Route("/episodes", self._guarded(self.episodes, "collection", "after", "robot")),
            # before the next route, which takes any text (an id with a slash gets its validation error)
            Route("/episodes/{session_id}/timeline",
                  self._gated(self.timeline, self.timeline_gate, "timeline", "page", "after", "at")),
            Route("/episodes/{session_id:path}", self._gated(self.episode, self.gate, "episode")),
            Route("/map", self._guarded(self.occupancy, "collection")),
            # any text: validation.memory_id refuses "abc" and "-1" with a JSON error naming the field
            Route("/memories/{memory_id}/image", self._guarded(self.image)),
            Route("/recall", self._guarded(self.recall, "q", "filter", "near", "field", "max_distance", "since",
                                           "until", "n", "min_relevance", "collection")),
        ]

    @staticmethod
    def _guarded(handler: Handler, *allowed: str) -> Any:
        def endpoint(request: Request) -> Response:
            return _answered(lambda: _render(handler(request, _params(request, allowed))))
        return endpoint

    @staticmethod
    def _gated(handler: Handler, gate: BuildGate, kind: str, *allowed: str) -> Any:
        """An episode page: one build per (kind, episode, query) however many ask at once, at most
        MAX_BUILDS over all episodes, beyond that 503 with Retry-After (the page waits and asks again)."""
        def endpoint(request: Request) -> Response:
            def produce() -> bytes:
                query = _params(request, allowed)
                key = (kind, request.path_params["session_id"], tuple(sorted(query.items())))
                return gate.run(key, lambda: _render(handler(request, query)))
            return _answered(produce)
        return endpoint

    def episodes(self, request: Request, query: dict[str, str]) -> Any:
        return episode_list(self.mem, collection=query.get("collection") or None, after=query.get("after") or None,
                            robot=query.get("robot") or None)

    def episode(self, request: Request, query: dict[str, str]) -> Any:
        return episode_detail(self.mem, request.path_params["session_id"])

    def timeline(self, request: Request, query: dict[str, str]) -> Any:
        # none of the three: the first page; episode_timeline refuses "-1", "2.5" and "abc" naming the field
        page = query.get("page")
        return episode_timeline(self.mem, request.path_params["session_id"], None if page is None else _whole(page, "page"),
                                after=query.get("after"), at=query.get("at"))

    def occupancy(self, request: Request, query: dict[str, str]) -> Any:
        return {"map": latest_map(self.mem, collection=query.get("collection") or None)}

    def image(self, request: Request, query: dict[str, str]) -> Any:
        data = self.mem.get_data(_whole(request.path_params["memory_id"], "memory_id"))
        thumbnail = data.get("thumbnail") if isinstance(data, dict) else None
        if not isinstance(thumbnail, dict):
            raise NotFoundError("this memory has no image thumbnail", field="memory_id")
        return {"shape": data.get("thumbnail_shape"), "base64": thumbnail.get("base64")}

    def recall(self, request: Request, query: dict[str, str]) -> Any:
        n = query.get("n")
        return self.mem.recall(  # Memory.recall checks n (validation.recall_n)
            query.get("q", ""), collection=query.get("collection") or None, n=_whole(n, "n") if n else 10,
            context_filter=query.get("filter") or None, spatial_sort=_near(query),
            since=query.get("since") or None, until=query.get("until") or None,
            min_relevance=_number(query, "min_relevance"),  # None: the default
        )


def _cross_origin(api: ASGIApp, allowed_origins: tuple[str, ...]) -> ASGIApp:
    """CORS headers for the origins ``--allow-origin`` names: without them a browser refuses a
    page on such an origin the answers the guard lets through, and it asks first (a preflight
    OPTIONS, answered here before the guard, which would want the token it is asking about)
    whether it may send ``Authorization``. Loopback origins the guard lets in get none: any
    local web page could then read the memory."""
    return CORSMiddleware(api, allow_origins=[origin_key(o) for o in allowed_origins], allow_methods=["GET"],
                          allow_headers=["Authorization"], max_age=600)


def _with_headers(app: ASGIApp) -> ASGIApp:
    """SECURITY_HEADERS on every HTTP answer."""
    extra = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                message = dict(message, headers=[*message.get("headers", []), *(h for h in extra if h[0] not in names)])
            await send(message)
        await app(scope, receive, send_with_headers)
    return wrapped


async def _bare_api(request: Request) -> Response:
    return _error(NotFoundError(f"no API path {request.url.path} (the API is under /api/)"))


def build_app(mem: Memory, *, host: str, token: str | None, allowed_origins: tuple[str, ...] = (),
              gate: BuildGate | None = None) -> ASGIApp:
    """Static page for anyone who may reach the host; the API needs the token when one is set.

    The page itself carries no data, so a browser can load it without credentials; it
    reads the token from the address's fragment (``#token=...``, never sent to a server)
    and sends it as ``Authorization: Bearer`` with every API call.
    """
    check_host = is_loopback_host(host)
    api: ASGIApp = HttpGuard(Starlette(routes=_Api(mem, gate).routes(),
                                       exception_handlers={404: _no_such_path, 405: _wrong_method,
                                                           Exception: _unexpected}),
                             token=token, check_host=check_host, allowed_origins=allowed_origins)
    if allowed_origins:
        api = _cross_origin(api, allowed_origins)
    static = StaticFiles(directory=str(files("robotmem.web") / "static"), html=True)
    page = HttpGuard(static, token=None, check_host=check_host, allowed_origins=allowed_origins)
    # "/api" (no slash) is no Mount's path; the page's files would answer it with a text/plain 404
    return _with_headers(Starlette(routes=[Mount("/api", app=api), Route("/api", _bare_api), Mount("/", app=page)]))
