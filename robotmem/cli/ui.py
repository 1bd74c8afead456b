"""``robotmem ui``: the local web view (episodes, map, timeline, recall)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "ui", help="Serve a local web view of the store.",
        description="Serve a web view of the store on 127.0.0.1 (opens nothing by itself; prints its address). "
                    "Binding another address needs a token (ROBOTMEM_TOKEN), as for the HTTP MCP server.")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8766, help="port (default 8766; 0 picks a free one)")
    parser.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                        help="also accept browser requests from this Origin (repeatable)")
    parser.add_argument("--map", metavar="MAP_YAML",
                        help="store this ROS map.yaml (+ image) as an occupancy map and draw paths over it")
    parser.set_defaults(func=ui_command)


def ui_command(args: argparse.Namespace) -> int:
    from .. import validation
    from ..mcp.transports import check_http_binding
    from ..view import store_map
    from ..web.serve import run_ui
    from .store import load_config, open_existing

    port = validation.port(args.port, "--port")
    config = load_config(args)
    # Every refusal before the first write: a refused server must not have stored the map (or
    # built the embedding model) first.
    check_http_binding(args.host, config.token)
    # A viewer: a mistyped --home is an error, as for session list, not a new empty store.
    with open_existing(args, embedder="auto", config=config) as mem:
        if args.map:
            stored = store_map(mem, args.map, collection=mem.collection)
            print(f"occupancy map {args.map}: {stored['status']} (memory {stored['memory_id']})", flush=True)
        try:
            run_ui(mem, host=args.host, port=port, token=config.token, allowed_origins=tuple(args.allow_origin))
        except KeyboardInterrupt:
            pass
    return 0
