"""`robotmem`: noun-verb subcommands over the memory store.

Start-up stays quick: this module and the command modules import only argparse and each
other; a command imports the store, the model or the server when it runs. Subcommands
from other packages (the ROS bridge, replay) register through the entry point group
``robotmem.commands``: each entry is ``register(subparsers)``, and its module should import
its heavy parts inside the command too.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import RobotMemError
from .common import COMMON_DEFAULTS, CommandParser
from .output import emit, shown, tolerate_narrow_encodings
from .store import open_memory

__all__ = ["build_parser", "main", "open_memory"]

log = logging.getLogger("robotmem.cli")
_BUILTIN_PLUGINS = (
    "robotmem.cli.commands", "robotmem.cli.sessions", "robotmem.cli.consolidate", "robotmem.cli.model",
    "robotmem.cli.serve", "robotmem.cli.outcomes", "robotmem.cli.ui", "robotmem.cli.migrate",
)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole command tree; given ``argv`` naming a built-in command, the plugins are skipped
    (finding them through importlib.metadata costs more than the rest of the start-up)."""
    parser = CommandParser(prog="robotmem", description="Episodic memory for robots.")
    parser.set_defaults(**COMMON_DEFAULTS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in _BUILTIN_PLUGINS:
        importlib.import_module(module_name).register(sub)
    if argv is None or _command_name(argv) not in sub.choices:
        _register_entry_points(sub)
    return parser


def _command_name(argv: Sequence[str]) -> str | None:
    """The first word that is neither an option nor the value of a common option."""
    takes_value = {"--home", "--db", "--url", "--collection"}
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word in takes_value:
            skip = True
        elif not word.startswith("-"):
            return word
    return None


def _register_entry_points(sub: Any) -> None:
    from importlib.metadata import entry_points

    for entry in entry_points(group="robotmem.commands"):
        try:
            entry.load()(sub)
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the other commands
            log.debug("plugin %s failed to load: %s", entry.name, exc)


def _report(exc: RobotMemError, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"error": exc.to_dict()}), file=sys.stderr)
    else:
        field = f" ({exc.field})" if exc.field else ""
        print(shown(f"error{field}: {exc.message}"), file=sys.stderr)


#: Exit status when the reader of stdout went away (``robotmem session show ID | head -1``):
#: 128 + SIGPIPE, what a shell reports for a tool the closed pipe's signal stopped, so a
#: script under ``set -o pipefail`` can tell output that was cut short from a failed command (1).
EXIT_STDOUT_CLOSED = 128 + 13  # SIGPIPE is 13 (signal.SIGPIPE does not exist on Windows)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        code = _run(argv)
        sys.stdout.flush()  # a reader that went away shows here too, not in the flush at exit
    except BrokenPipeError:
        return _stdout_closed()
    return code


def _stdout_closed() -> int:
    """Stop quietly, as Unix tools do when their reader closes the pipe.

    As the Python docs advise (signal module, "Note on SIGPIPE"): stdout is pointed at
    /dev/null, so that the interpreter's own flush at exit writes nowhere instead of printing
    a second BrokenPipeError.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout without a file descriptor (replaced in-process): nothing to redirect
        pass
    return EXIT_STDOUT_CLOSED


def _run(argv: Sequence[str] | None) -> int:
    tolerate_narrow_encodings(sys.stdout, sys.stderr)
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(words)
    args = parser.parse_args(words)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)  # no command is a usage error: stdout stays for results
        return 2
    try:
        result = args.func(args)
    except RobotMemError as exc:
        _report(exc, args.json)
        return 1
    except KeyboardInterrupt:
        return 130
    if isinstance(result, int) and not isinstance(result, bool):
        return result
    if result is not None:
        emit(result, args.json, getattr(args, "render", None))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
