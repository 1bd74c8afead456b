"""`robotmem`: noun-verb subcommands over the memory store.

Subcommands from other packages (the ROS bridge, replay) register through the entry
point group ``robotmem.commands``: each entry is ``register(subparsers)``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from ..config import Config
from ..errors import RobotMemError, ValidationError
from ..service import Memory
from .output import emit, progress_printer

__all__ = ["build_parser", "main", "open_memory"]

log = logging.getLogger("robotmem.cli")
_BUILTIN_PLUGINS = ("robotmem.mcp.cli", "robotmem.embeddings.cli", "robotmem.consolidation.cli", "robotmem.cli.outcomes",
                    "robotmem.cli.ui")


def open_memory(args: argparse.Namespace, *, embedder: Any = "auto") -> Memory:
    """The store named by --home/--db (or the environment / defaults)."""
    config = Config.load(home=args.home, db_path=args.db)
    return Memory(config.database, collection=getattr(args, "collection", None) or config.collection,
                  embedder=embedder, config=config)


def _json_arg(text: str | None) -> Any:
    return None if text is None else text  # Memory validates JSON text and names the field


def cmd_recall(args: argparse.Namespace) -> Any:
    spatial = None
    if args.near:
        field, *xyz = args.near
        try:
            target = [float(v) for v in xyz]
        except ValueError as exc:
            raise ValidationError(f"--near takes FIELD X Y [Z] with numbers: {exc}", field="--near") from exc
        spatial = {"field": field, "target": target}
        if args.max_distance is not None:
            spatial["max_distance"] = args.max_distance
    with open_memory(args) as mem:
        return mem.recall(args.query, n=args.n, min_confidence=args.min_confidence, session_id=args.session,
                          context_filter=_json_arg(args.filter), spatial_sort=spatial,
                          since=args.since, until=args.until)


def cmd_learn(args: argparse.Namespace) -> Any:
    with open_memory(args) as mem:
        return mem.learn(args.insight, context=args.context, session_id=args.session)


def cmd_forget(args: argparse.Namespace) -> Any:
    with open_memory(args, embedder=None) as mem:
        return mem.forget(args.memory_id, args.reason)


def cmd_update(args: argparse.Namespace) -> Any:
    with open_memory(args) as mem:
        return mem.update(args.memory_id, args.new_content, context=args.context)


def cmd_get(args: argparse.Namespace) -> Any:
    with open_memory(args, embedder=None) as mem:
        return mem.get_data(args.memory_id) if args.data else mem.get(args.memory_id)


def cmd_stats(args: argparse.Namespace) -> Any:
    with open_memory(args, embedder=None) as mem:
        return mem.stats(collection=args.collection)


def cmd_export(args: argparse.Namespace) -> Any:
    with open_memory(args, embedder=None) as mem:
        return mem.export(args.file)


def cmd_import(args: argparse.Namespace) -> Any:
    with open_memory(args) as mem:
        return mem.import_(args.file)


def cmd_reindex(args: argparse.Namespace) -> Any:
    with open_memory(args) as mem:
        return mem.reindex(progress=progress_printer("reindex"))


def cmd_session_start(args: argparse.Namespace) -> Any:
    with open_memory(args, embedder=None) as mem:
        return mem.start_session(context=args.context)


def cmd_session_end(args: argparse.Namespace) -> Any:
    with open_memory(args) as mem:
        return mem.end_session(args.session_id, args.score)


def cmd_session_list(args: argparse.Namespace) -> Any:
    with open_memory(args, embedder=None) as mem:
        return mem.list_sessions(collection=args.collection, status=args.status)


def cmd_session_show(args: argparse.Namespace) -> Any:
    with open_memory(args, embedder=None) as mem:
        if args.plot:
            from ..view import plot_episode

            written = plot_episode(mem, args.session_id, args.plot)
            print(f"wrote {written}", file=sys.stderr)
        return mem.session_timeline(args.session_id)


def cmd_demo(args: argparse.Namespace) -> Any:
    from .demo import run_demo

    with open_memory(args) as mem:
        result = run_demo(mem, sys.stdout if not args.json else sys.stderr)
    return result if args.json else None  # people already read the narration


def _add(sub: Any, name: str, func: Callable[[argparse.Namespace], Any], help: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help)
    parser.set_defaults(func=func)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="robotmem", description="Episodic memory for robots.")
    parser.add_argument("--home", help="data directory (default $ROBOTMEM_HOME or ~/.robotmem)")
    parser.add_argument("--db", help="SQLite file (default HOME/memory.db)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--collection", help="collection (default from config: 'default')")
    parser.add_argument("-v", "--verbose", action="store_true", help="log to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = _add(sub, "recall", cmd_recall, "Recall the most relevant memories.")
    p.add_argument("query", nargs="?", default="")
    p.add_argument("--filter", help='context filter JSON, e.g. \'{"task.success": true}\'')
    p.add_argument("--near", nargs="+", metavar=("FIELD", "X"), help="nearest first: FIELD X Y [Z]")
    p.add_argument("--max-distance", type=float)
    p.add_argument("-n", type=int, default=5)
    p.add_argument("--min-confidence", type=float, default=0.3)
    p.add_argument("--session")
    p.add_argument("--since")
    p.add_argument("--until")

    p = _add(sub, "learn", cmd_learn, "Store an insight.")
    p.add_argument("insight")
    p.add_argument("--context", help="context JSON")
    p.add_argument("--session")

    p = _add(sub, "forget", cmd_forget, "Retract a memory (soft delete).")
    p.add_argument("memory_id", type=int)
    p.add_argument("--reason", required=True)

    p = _add(sub, "update", cmd_update, "Correct a memory.")
    p.add_argument("memory_id", type=int)
    p.add_argument("new_content")
    p.add_argument("--context", help="replacement context JSON")

    memory = sub.add_parser("memory", help="Read single memories.").add_subparsers(dest="verb", metavar="VERB")
    p = _add(memory, "get", cmd_get, "Show one memory (any status).")
    p.add_argument("memory_id", type=int)
    p.add_argument("--data", action="store_true", help="print the full perception payload instead")

    session = sub.add_parser("session", help="Episodes.").add_subparsers(dest="verb", metavar="VERB")
    p = _add(session, "start", cmd_session_start, "Open an episode.")
    p.add_argument("--context", help="context JSON")
    p = _add(session, "end", cmd_session_end, "Close an episode and consolidate it.")
    p.add_argument("session_id")
    p.add_argument("--score", type=float)
    p = _add(session, "list", cmd_session_list, "List episodes.")
    p.add_argument("--status", choices=("open", "ended"))
    p = _add(session, "show", cmd_session_show, "An episode's timeline.")
    p.add_argument("session_id")
    p.add_argument("--plot", type=Path, metavar="FILE.png",
                   help="Also draw the episode's path and payload plots into this PNG (needs robotmem[plot]).")

    _add(sub, "stats", cmd_stats, "Store statistics.")
    p = _add(sub, "export", cmd_export, "Export everything as JSON Lines.")
    p.add_argument("file", type=Path)
    p = _add(sub, "import", cmd_import, "Import a JSON Lines export (idempotent).")
    p.add_argument("file", type=Path)
    _add(sub, "reindex", cmd_reindex, "Re-embed memories with the active model.")
    _add(sub, "demo", cmd_demo, "Write a short demo episode into the store and recall from it.")
    _register_plugins(sub)
    return parser


def _register_plugins(sub: Any) -> None:
    import importlib

    for module_name in _BUILTIN_PLUGINS:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            log.debug("plugin %s unavailable: %s", module_name, exc)
            continue
        module.register(sub)
    for entry in entry_points(group="robotmem.commands"):
        try:
            entry.load()(sub)
        except Exception as exc:  # a broken plugin must not break the other commands
            log.debug("plugin %s failed to load: %s", entry.name, exc)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # --json is accepted anywhere on the line (robotmem stats --json), not only before the verb.
    as_json = "--json" in argv
    args = parser.parse_args([a for a in argv if a != "--json"])
    args.json = as_json
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        result = args.func(args)
    except RobotMemError as exc:
        if args.json:
            print(json.dumps({"error": exc.to_dict()}), file=sys.stderr)
        else:
            field = f" ({exc.field})" if exc.field else ""
            print(f"error{field}: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    if isinstance(result, int) and not isinstance(result, bool):
        return result
    if result is not None:
        emit(result, args.json)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
