"""The ASGI app: static page + JSON API, behind the same guard as the HTTP MCP server."""

from __future__ import annotations

from importlib.resources import files
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from ..errors import NotFoundError, RobotMemError, ValidationError
from ..mcp.http_guard import HttpGuard, is_loopback_host, origin_key
from ..view import episode_detail, episode_list, episode_timeline, latest_map

if TYPE_CHECKING:  # pragma: no cover
    from ..service import Memory

__all__ = ["build_app"]

_STATUS = {ValidationError: 400, NotFoundError: 404}


def _error(exc: RobotMemError) -> JSONResponse:
    status = next((code for kind, code in _STATUS.items() if isinstance(exc, kind)), 500)
    return JSONResponse({"error": exc.to_dict()}, status_code=status)


def _number(request: Request, name: str) -> float | None:
    text = request.query_params.get(name)
    if text in (None, ""):
        return None
    try:
        return float(text)
    except ValueError as exc:
        raise ValidationError(f"{name} must be a number, not {text[:40]!r}", field=name) from exc


def _literal(text: str) -> Any:
    """A query or path parameter as the number it spells (an integer before a float), else the
    text itself, for robotmem.validation to accept or refuse with its own rule and message:
    "2.5", "nan" and "1e400" spell floats, which an integer field refuses (never truncated)."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _near(request: Request) -> dict[str, Any] | None:
    text = request.query_params.get("near")
    if not text:
        return None
    try:
        target = [float(v) for v in text.split(",")]
    except ValueError as exc:
        raise ValidationError("near takes numbers separated by commas, e.g. 1.5,-2", field="near") from exc
    spatial: dict[str, Any] = {"field": request.query_params.get("field") or "spatial.position", "target": target}
    max_distance = _number(request, "max_distance")
    if max_distance is not None:
        spatial["max_distance"] = max_distance
    return spatial


async def _no_such_path(request: Request, exc: Exception) -> Response:
    """An unknown /api path gets the documented JSON error too, not Starlette's plain text."""
    return _error(NotFoundError(f"no API path {request.url.path}"))


class _Api:
    """Handlers; each reads the store afresh (a bridge may be writing right now)."""

    def __init__(self, mem: Memory) -> None:
        self.mem = mem

    def routes(self) -> list[Route]:
        return [
            Route("/episodes", self._guarded(self.episodes)),
            # before the next route, which takes any text (an id with a slash gets its validation error)
            Route("/episodes/{session_id}/timeline", self._guarded(self.timeline)),
            Route("/episodes/{session_id:path}", self._guarded(self.episode)),
            Route("/map", self._guarded(self.occupancy)),
            # any text: validation.memory_id refuses "abc" and "-1" with a JSON error naming the field
            Route("/memories/{memory_id}/image", self._guarded(self.image)),
            Route("/recall", self._guarded(self.recall)),
        ]

    @staticmethod
    def _guarded(handler: Any) -> Any:
        def endpoint(request: Request) -> Response:
            try:
                return JSONResponse(handler(request))
            except RobotMemError as exc:
                return _error(exc)
        return endpoint

    def episodes(self, request: Request) -> Any:
        return episode_list(self.mem, collection=request.query_params.get("collection") or None)

    def episode(self, request: Request) -> Any:
        return episode_detail(self.mem, request.path_params["session_id"])

    def timeline(self, request: Request) -> Any:
        # no page: the first; episode_timeline refuses "-1", "2.5" and "abc" naming the field
        page = request.query_params.get("page") or "0"
        return episode_timeline(self.mem, request.path_params["session_id"], _literal(page))

    def occupancy(self, request: Request) -> Any:
        return {"map": latest_map(self.mem, collection=request.query_params.get("collection") or None)}

    def image(self, request: Request) -> Any:
        data = self.mem.get_data(_literal(request.path_params["memory_id"]))
        thumbnail = data.get("thumbnail") if isinstance(data, dict) else None
        if not isinstance(thumbnail, dict):
            raise NotFoundError("this memory has no image thumbnail", field="memory_id")
        return {"shape": data.get("thumbnail_shape"), "base64": thumbnail.get("base64")}

    def recall(self, request: Request) -> Any:
        query = request.query_params
        n = query.get("n")
        filter_text = query.get("filter") or None
        return self.mem.recall(  # Memory.recall checks n (validation.recall_n)
            query.get("q", ""), collection=query.get("collection") or None, n=_literal(n) if n else 10,
            context_filter=filter_text, spatial_sort=_near(request),
            since=query.get("since") or None, until=query.get("until") or None,
            min_relevance=_number(request, "min_relevance"),  # None: the default
        )


def _cross_origin(api: ASGIApp, allowed_origins: tuple[str, ...]) -> ASGIApp:
    """CORS headers for the origins ``--allow-origin`` names: without them a browser refuses a
    page on such an origin the answers the guard lets through, and it asks first (a preflight
    OPTIONS, answered here before the guard, which would want the token it is asking about)
    whether it may send ``Authorization``. Loopback origins the guard lets in get none: any
    local web page could then read the memory."""
    return CORSMiddleware(api, allow_origins=[origin_key(o) for o in allowed_origins], allow_methods=["GET"],
                          allow_headers=["Authorization"], max_age=600)


def build_app(mem: Memory, *, host: str, token: str | None, allowed_origins: tuple[str, ...] = ()) -> ASGIApp:
    """Static page for anyone who may reach the host; the API needs the token when one is set.

    The page itself carries no data, so a browser can load it without credentials; it
    reads the token from the address's fragment (``#token=...``, never sent to a server)
    and sends it as ``Authorization: Bearer`` with every API call.
    """
    check_host = is_loopback_host(host)
    api: ASGIApp = HttpGuard(Starlette(routes=_Api(mem).routes(), exception_handlers={404: _no_such_path}),
                             token=token, check_host=check_host, allowed_origins=allowed_origins)
    if allowed_origins:
        api = _cross_origin(api, allowed_origins)
    static = StaticFiles(directory=str(files("robotmem.web") / "static"), html=True)
    page = HttpGuard(static, token=None, check_host=check_host, allowed_origins=allowed_origins)
    return Starlette(routes=[Mount("/api", app=api), Mount("/", app=page)])
