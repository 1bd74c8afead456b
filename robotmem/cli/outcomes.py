"""``robotmem outcomes GROUP_BY``: success per value over matching experience (Memory.outcome_stats)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from ..errors import ValidationError
from .commands import add_near_options, near_target

__all__ = ["cmd_outcomes", "outcome_lines", "register"]


def register(subparsers: Any) -> None:
    help_text = "Success rate (Wilson 95 % interval) per value of a context field, over every matching memory."
    p = subparsers.add_parser("outcomes", help=help_text.replace("%", "%%"), description=help_text)
    p.add_argument("group_by", help="context dot path, e.g. params.push_factor")
    p.add_argument("--query", default="", help="only memories containing every word")
    p.add_argument("--filter", help='context filter JSON, e.g. \'{"task.name": "push"}\'')
    add_near_options(p, "neighbourhood of FIELD X Y [Z]")
    p.add_argument("-k", type=int, help="with --near: the k nearest")
    p.add_argument("--bins", type=int, help="bin numbers into this many equal-width bins")
    p.add_argument("--edges", type=float, nargs="+", help="bin numbers at these increasing edges")
    p.add_argument("--success-threshold", type=float, default=0.5,
                   help="episode.outcome counting as success when task.success is absent (default 0.5)")
    p.add_argument("--since", metavar="TIME", help="only memories from this time on (ISO 8601 or Unix seconds)")
    p.add_argument("--until", metavar="TIME", help="only memories up to this time (ISO 8601 or Unix seconds)")
    p.set_defaults(func=cmd_outcomes, render=outcome_lines)


def cmd_outcomes(args: argparse.Namespace) -> Any:
    from .store import open_existing

    if args.bins is not None and args.edges:
        raise ValidationError("give --bins or --edges, not both", field="--edges")
    spatial = near_target(args)  # checked before the store is looked for, as recall does
    with open_existing(args) as mem:
        result = mem.outcome_stats(
            args.group_by, query=args.query, context_filter=args.filter, spatial_sort=spatial, k=args.k,
            bins=args.edges or args.bins, success_threshold=args.success_threshold, since=args.since,
            until=args.until,
        )
    return result


def _label(group: dict[str, Any]) -> str:
    if "bin" in group:
        lo, hi = group["bin"]
        return f"[{'-inf' if lo is None else f'{lo:g}'}, {'inf' if hi is None else f'{hi:g}'})"
    return str(group["value"])


def outcome_lines(result: dict[str, Any]) -> Iterator[str]:
    """The table people read (written through emit, which escapes what a stored value holds)."""
    yield (f"{result['group_by']}: {result['matched']} memories matched "
           f"({result['without_field']} without the field, {result['without_outcome']} without an outcome)")
    yield f"{'value':<18} {'n':>6} {'succ':>6} {'rate':>6}  {'wilson 95 %':<15} {'mean outcome':>12}"
    for g in result["groups"]:
        rate = "-" if g["success_rate"] is None else f"{g['success_rate']:.3f}"
        interval = "-" if g["wilson_95"] is None else f"[{g['wilson_95'][0]:.3f}, {g['wilson_95'][1]:.3f}]"
        mean = "-" if g["mean_outcome"] is None else f"{g['mean_outcome']:.3f}"
        yield f"{_label(g):<18} {g['count']:>6} {g['successes']:>6} {rate:>6}  {interval:<15} {mean:>12}"
