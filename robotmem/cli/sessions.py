"""``robotmem session start|end|list|show``: episodes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .output import human_lines
from .store import open_existing, open_memory
from .timeline import episode_table, timeline_lines

__all__ = ["register"]


def cmd_start(args: argparse.Namespace) -> Any:
    with open_memory(args, embedder=None) as mem:
        return mem.start_session(context=args.context)


def cmd_end(args: argparse.Namespace) -> Any:
    with open_existing(args, embedder="auto") as mem:
        return mem.end_session(args.session_id, args.score)


def render_end(summary: dict[str, Any]) -> Iterator[str]:
    related = summary.get("related") or []
    yield from human_lines({k: v for k, v in summary.items() if k != "related"})
    for hit in related:
        yield f"related: #{hit['id']} ({hit.get('score', 0):.3f}) {hit['content']}"


def _overviewed(mem: Any, sessions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sessions with the start, duration and live counts the web view shows (robotmem.view.with_overviews)."""
    from ..view import with_overviews  # loads numpy: only when listing or showing, not to build the parser

    return [{k: v for k, v in s.items() if k != "summary_memory"} for s in with_overviews(mem, sessions)]


def cmd_list(args: argparse.Namespace) -> Any:
    with open_existing(args) as mem:
        # When the episode happened (a replayed one: its recorded time) and what it holds now,
        # as session show and the web view say: aggregate queries, not every episode's records.
        return _overviewed(mem, mem.list_sessions(collection=args.collection, status=args.status, limit=args.limit))


def cmd_show(args: argparse.Namespace) -> Any:
    with open_existing(args) as mem:
        if args.plot:
            from ..view import plot_episode

            written = plot_episode(mem, args.session_id, args.plot)
            print(f"wrote {written}", file=sys.stderr)
        timeline = mem.session_timeline(args.session_id)
        (timeline["session"],) = _overviewed(mem, [timeline["session"]])
        return timeline


def _verb(verbs: Any, name: str, func: Any, help: str, render: Any = human_lines) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = verbs.add_parser(name, help=help, description=help)
    parser.set_defaults(func=func, render=render)
    return parser


def register(sub: Any) -> None:
    session = sub.add_parser("session", help="Episodes: start, end, list, show.", description="Episodes.")
    session.set_defaults(func=lambda _args: session.print_help(sys.stderr) or 2)  # a usage error: stderr
    verbs = session.add_subparsers(dest="verb", metavar="VERB")
    p = _verb(verbs, "start", cmd_start, "Open an episode.")
    p.add_argument("--context", metavar="JSON", help="the episode's context: task, robot, params")
    p = _verb(verbs, "end", cmd_end, "Close an episode and consolidate it.", render_end)
    p.add_argument("session_id", help="the episode's id")
    p.add_argument("--score", type=float, help="outcome score in [0, 1]")
    p = _verb(verbs, "list", cmd_list, "List episodes as a table.", episode_table)
    p.add_argument("--status", choices=("open", "ended"), help="only open or only ended episodes")
    p.add_argument("--limit", type=int, default=100, help="at most this many, newest first (default 100)")
    p = _verb(verbs, "show", cmd_show, "An episode's timeline, one line per record.", timeline_lines)
    p.add_argument("session_id", help="the episode's id")
    p.add_argument("--plot", type=Path, metavar="FILE.png",
                   help="also draw the episode's path and payload plots into this PNG (needs robotmem[plot])")
