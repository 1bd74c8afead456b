"""``python -m bridges.rosbridge``: the ``robotmem bridge`` command without the robotmem CLI."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .cli import add_arguments, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bridges.rosbridge", description="robotmem bridge",
                                     allow_abbrev=False)
    # The root options of the robotmem CLI.
    parser.add_argument("--home", type=Path, default=None, help="ROBOTMEM_HOME")
    parser.add_argument("--db", type=Path, default=None, help="SQLite file")
    parser.add_argument("--json", action="store_true", help="print the final counters as JSON")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
