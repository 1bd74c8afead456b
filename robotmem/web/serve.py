"""Running the web view with uvicorn on a socket bound here (port 0 resolves to a free port)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

from ..mcp.transports import _bind, check_http_binding
from .app import build_app

if TYPE_CHECKING:  # pragma: no cover
    from ..service import Memory

__all__ = ["run_ui"]


def run_ui(mem: Memory, *, host: str, port: int, token: str | None, allowed_origins: tuple[str, ...] = (),
           out: TextIO = sys.stdout) -> None:
    """Serve until interrupted; prints the address once it is listening."""
    import uvicorn

    check_http_binding(host, token)
    sock = _bind(host, port)
    shown_host = f"[{host.strip('[]')}]" if ":" in host else host
    url = f"http://{shown_host}:{sock.getsockname()[1]}/"
    app = build_app(mem, host=host, token=token, allowed_origins=allowed_origins)
    print(f"robotmem ui: {url}" + ("  (open it as URL#token=<your token>)" if token else ""), file=out, flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    server.run(sockets=[sock])
