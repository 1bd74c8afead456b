"""The options every command takes (--home, --db, --collection, --json, -v), anywhere on the line.

Every parser in the tree is a :class:`CommandParser`, which adds the common options to
itself, so ``robotmem stats --db x.db`` works as well as ``robotmem --db x.db stats``.
Below the root their default is SUPPRESS: an option not given after the verb leaves the
root's value alone. A command that defines one of them itself (``replay --collection``)
replaces the common one (conflict_handler="resolve").
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["COMMON_DEFAULTS", "CommandParser"]

COMMON_DEFAULTS: dict[str, Any] = {"home": None, "db": None, "store_url": None, "collection": None, "json": False,
                                   "verbose": False}


def _add_common_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("common options (accepted anywhere on the line)")
    group.add_argument("--home", metavar="DIR", default=argparse.SUPPRESS,
                       help="data directory (default $ROBOTMEM_HOME or ~/.robotmem)")
    group.add_argument("--db", metavar="FILE", default=argparse.SUPPRESS,
                       help="SQLite file of the store (default HOME/memory.db)")
    # dest store_url: ``robotmem bridge --url`` is the rosbridge websocket (that command's own option).
    group.add_argument("--url", dest="store_url", metavar="URL", default=argparse.SUPPRESS,
                       help="a PostgreSQL store postgresql://user@host/db instead of the SQLite file "
                            "(default $ROBOTMEM_URL; docs/fleet.md)")
    group.add_argument("--collection", metavar="NAME", default=argparse.SUPPRESS,
                       help="collection to read and write (default from config: 'default')")
    group.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                       help="print JSON instead of text")
    group.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                       help="log to stderr")


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser that takes the common options; its subparsers are CommandParsers too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("conflict_handler", "resolve")
        # No prefixes of long options: `recall --n 3` (the API's ``n``) was taken for `--near 3`
        # and answered with an error about spatial_sort.target the user never gave.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        _add_common_options(self)
