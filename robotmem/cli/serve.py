"""``robotmem serve``: the CLI plugin that runs the MCP server.

The root CLI calls :func:`register` with its subparsers (common options ``--home``,
``--db`` and ``--collection`` are already on the root parser). :func:`main` is what
``python -m robotmem`` runs without arguments: the stdio server, without loading the rest
of the CLI and its plugins (a quick start matters to MCP clients). The server itself
(robotmem.mcp) is imported only when it runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from .. import validation
from ..errors import RobotMemError
from .store import load_config

__all__ = ["add_serve_arguments", "main", "register", "serve_command"]



def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default) or streamable HTTP at /mcp",
    )
    parser.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765; 0 picks a free one)")
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="also accept browser requests from this Origin, e.g. https://dashboard.example (repeatable)",
    )


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="Run the MCP server (stdio or streamable HTTP).",
        description="Serve the robotmem tools to MCP clients. HTTP binds loopback by default; "
        "a token (ROBOTMEM_TOKEN or config.json) is required to bind anything else.",
    )
    add_serve_arguments(parser)
    parser.set_defaults(func=serve_command)


def serve_command(args: argparse.Namespace) -> int:
    from ..mcp.transports import configure_logging, run_http, run_stdio

    configure_logging()
    try:
        port = validation.port(args.port, "--port")
        config = load_config(args)
        if args.transport == "stdio":
            if run_stdio(config) is True:
                from .main import EXIT_STDOUT_CLOSED  # only now: a quick start loads no more of the CLI

                return EXIT_STDOUT_CLOSED
        else:
            run_http(config, args.host, port, args.allow_origin)
    except RobotMemError as exc:
        print(f"robotmem serve: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m robotmem", description="Run the robotmem MCP server."
    )
    parser.add_argument("--home", default=None, help="data directory (default $ROBOTMEM_HOME or ~/.robotmem)")
    parser.add_argument("--db", default=None, help="SQLite file (default HOME/memory.db)")
    parser.add_argument("--url", dest="store_url", default=None,
                        help="PostgreSQL URL instead of the SQLite file ($ROBOTMEM_URL)")
    add_serve_arguments(parser)
    return serve_command(parser.parse_args(argv))
