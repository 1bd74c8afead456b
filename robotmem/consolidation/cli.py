"""``robotmem consolidate [--collection NAME]``: the CLI plugin for offline consolidation."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["cmd_consolidate", "register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "consolidate",
        help="Merge, reinforce and decay over all ended sessions (after a bulk import or replay).",
        description="Run end-of-episode consolidation over every ended session, oldest first, then the "
                    "decay/archive pass; prints the summed counts.",
    )
    # Its own dest: argparse would let a subcommand default overwrite the root's --collection.
    parser.add_argument("--collection", dest="consolidate_collection", metavar="NAME",
                        help="only this collection (default: every collection)")
    parser.set_defaults(func=cmd_consolidate)


def cmd_consolidate(args: argparse.Namespace) -> Any:
    from ..cli.main import open_memory
    from ..cli.output import progress_printer

    collection = args.consolidate_collection or getattr(args, "collection", None)
    with open_memory(args) as mem:
        return mem.consolidate(collection, progress=progress_printer("consolidate"))
