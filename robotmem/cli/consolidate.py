"""``robotmem consolidate [--collection NAME]``: offline consolidation over ended episodes."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from ..errors import NotFoundError
from .output import progress_bar
from .store import open_existing

__all__ = ["cmd_consolidate", "register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "consolidate",
        help="Merge, reinforce and decay over all ended episodes (after a bulk import or replay).",
        description="Run end-of-episode consolidation over every ended episode, oldest first, then the "
                    "decay/archive pass; prints the summed counts. --collection limits it to one collection.",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=cmd_consolidate, render=render_consolidate)


def cmd_consolidate(args: argparse.Namespace) -> Any:
    with open_existing(args, embedder="auto") as mem:
        if args.collection is not None and not mem.list_sessions(collection=args.collection, limit=1):
            raise NotFoundError(f"collection {args.collection!r} has no episodes", field="--collection")
        return mem.consolidate(args.collection, progress=progress_bar("consolidate", not args.no_progress))


def render_consolidate(result: dict[str, Any]) -> Iterator[str]:
    where = f"collection {result['collection']}" if result.get("collection") else "every collection"
    counts = ", ".join(f"{value} {key}" for key, value in result.items()
                       if key != "collection" and isinstance(value, int) and not isinstance(value, bool))
    yield f"consolidated {where}: {counts}"
