"""Outcome statistics: "near situations like this one, how often did each value succeed?"

A control loop choosing a parameter needs counts over *all* matching experience, not
the ten best-ranked memories, so this is exact set arithmetic, not ranking. The
semantics, one description for both stores (robotmem.search.outcomes_sqlite answers it
from SQLite's leaf index, robotmem.search.outcomes_postgres in PostgreSQL's SQL, and the
tests hold both to a plain-Python oracle):

1. the set: memories of the collection that are not forgotten (merged and archived
   memories are still experience that happened, unless the memory that absorbed them
   was forgotten), narrowed by a context filter, a time window (``occurred_at``), full
   text (every query word must occur; a superseded memory left the full-text index when
   it was merged, so it matches when the memory that absorbed it does: a merge needs
   near-identical text) and a spatial neighbourhood (within ``max_distance`` of a point,
   or the ``k`` nearest, ties broken by the newer id; with ``spatial_sort.frame``, only
   memories in that frame or naming none, as recall compares them);
2. each memory's verdict: ``task.success`` when it is true/false, else
   ``episode.outcome >= success_threshold`` when the episode was scored (a number),
   else none; its score: ``episode.outcome`` when it is a number;
3. groups by the JSON value at ``group_by`` (5 and 5.0 are one group, as they are one
   value to the filter grammar; numbers by exact value, so 2**53 and 2**53 + 1 are two;
   numbers optionally binned), each with its count of
   memories, of verdicts, of successes, of scores and their sum (in two parts, so that it
   cannot overflow); a number group shows as an integer when it holds one; binned and given a
   Wilson 95 % interval here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from ..context import load_stored_json
from ..store.backend import dialect_of
from .leaf_columns import LeafColumns
from .outcome_request import BIG_SCORE_SCALE, OutcomeRequest, Row
from .outcomes_sqlite import sqlite_rows

__all__ = ["compute_outcome_stats", "wilson_interval"]

WILSON_Z = 1.959963984540054  # two-sided 95 %


def wilson_interval(successes: int, n: int, z: float = WILSON_Z) -> tuple[float, float] | None:
    """Wilson score interval for a binomial proportion; None when there is nothing to estimate."""
    if n <= 0:
        return None
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


# -- counting --------------------------------------------------------------------------


@dataclass
class _Tally:
    memories: int = 0
    judged: int = 0
    successes: int = 0
    scored: int = 0
    score_sum: float = 0.0
    #: the sum of the scores of BIG_SCORE or more in magnitude, each times BIG_SCORE_SCALE
    big_score_sum: float = 0.0
    #: the group's value (5 and 5.0: one group, shown as 5)
    shown: Any = None

    def add(self, row: Sequence[Any]) -> None:
        self.memories += row[0]
        self.judged += row[1]
        self.successes += row[2]
        self.scored += row[3]
        self.score_sum += row[4]
        self.big_score_sum += row[5]

    def mean_score(self) -> float | None:
        if not self.scored:
            return None
        # Each part's mean is within the range of its scores, so neither overflows.
        return self.score_sum / self.scored + (self.big_score_sum / self.scored) / BIG_SCORE_SCALE


def _json_value(kind: str, value: Any) -> Any:
    if kind in ("true", "false"):
        return kind == "true"
    if kind in ("object", "array"):
        return load_stored_json(value)
    return value


def _bin_of(value: float, edges: tuple[float, ...]) -> tuple[float | None, float | None]:
    if value < edges[0]:
        return (None, edges[0])
    if value > edges[-1]:
        return (edges[-1], None)
    lo, hi = 0, len(edges) - 1
    while hi - lo > 1:  # the last bin is closed: the top edge belongs to it
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if value >= edges[mid] else (lo, mid)
    return (edges[lo], edges[hi])


def _equal_width_edges(values: list[float], count: int) -> tuple[float, ...]:
    low, high = min(values), max(values)
    if high == low:
        return (low, high + 1.0) if count == 1 else tuple(low + i for i in range(count + 1))
    width = high - low
    if math.isfinite(width):
        step = width / count
        return tuple(low + i * step for i in range(count)) + (high,)
    # A range wider than the largest float (-1e308 to 1e308): the same edges computed at half scale,
    # where neither the width nor an edge overflows (halving is exact at this magnitude).
    half_step = (high / 2 - low / 2) / count
    return tuple(2 * (low / 2 + i * half_step) for i in range(count)) + (high,)


def _group(req: OutcomeRequest, rows: list[Row]) -> tuple[dict[Any, _Tally], _Tally, list[Any]]:
    """Tallies per group key, the tally of memories without the field, and the bin edges' keys in order."""
    numbers = [gv for gt, gv, *_ in rows if gt in ("integer", "real")]
    edges: tuple[float, ...] | None = None
    if isinstance(req.bins, int) and numbers:
        edges = _equal_width_edges([float(v) for v in numbers], req.bins)
    elif isinstance(req.bins, tuple):
        edges = req.bins
    groups: dict[Any, _Tally] = {}
    missing = _Tally()
    for gt, gv, *counts in rows:
        if gt is None:
            missing.add(counts)
            continue
        if edges is not None and gt in ("integer", "real"):
            key: Any = ("bin", _bin_of(float(gv), edges))
        else:
            value = _json_value(gt, gv)
            if gt in ("integer", "real"):
                # By exact value: 5 and 5.0 (and -0.0 and 0) are one group, as they are one value to the
                # filter grammar, and 2**53 and 2**53 + 1 two (Python compares int and float exactly,
                # and equal numbers hash alike). float() merged integers beyond 2**53.
                key = ("number", value)
            else:
                key = ("value", json.dumps(value, sort_keys=True))
            tally = groups.setdefault(key, _Tally(shown=value))
            if gt == "integer" and isinstance(tally.shown, float):
                # 1 and 1.0 in one group show as the integer, whichever a store read first.
                tally.shown = value
        groups.setdefault(key, _Tally()).add(counts)
    bin_keys = [("bin", pair) for pair in pairwise(edges)] if edges is not None else []
    for key in bin_keys:
        groups.setdefault(key, _Tally())
    return groups, missing, bin_keys


def _sort_key(key: Any, tally: _Tally) -> tuple[Any, ...]:
    if key[0] == "bin":
        lo, hi = key[1]
        return (0, -math.inf if lo is None else lo, math.inf if hi is None else hi)
    value = tally.shown
    if isinstance(value, bool):
        return (2, int(value))
    if isinstance(value, (int, float)):
        return (1, value)
    return (3, key[1])


def _describe(key: Any, tally: _Tally) -> dict[str, Any]:
    interval = wilson_interval(tally.successes, tally.judged)
    group: dict[str, Any] = {"bin": list(key[1])} if key[0] == "bin" else {"value": tally.shown}
    group.update(
        memories=tally.memories,
        count=tally.judged,
        successes=tally.successes,
        success_rate=None if not tally.judged else tally.successes / tally.judged,
        wilson_95=None if interval is None else list(interval),
        scored=tally.scored,
        mean_outcome=tally.mean_score(),
    )
    return group


def compute_outcome_stats(conn: Any, req: OutcomeRequest, *, plan: str = "index",
                          columns: LeafColumns | None = None) -> dict[str, Any]:
    """The statistics of ``req`` on the store of ``conn``.

    ``plan`` (SQLite): "index" answers from the leaf index; "scan" evaluates the JSON of
    every memory of the set, the reference the index plan is tested and benchmarked against.
    ``columns`` (SQLite, index plan): the caller's cached leaf columns to count from.
    """
    if dialect_of(conn) == "postgresql":
        # Imported here: it loads psycopg, which only the [postgres] extra installs.
        from .outcomes_postgres import postgres_rows

        rows = postgres_rows(conn, req)
    else:
        rows = sqlite_rows(conn, req, use_index=plan == "index", columns=columns)
    groups, missing, _ = _group(req, rows)
    total = _Tally()
    for tally in groups.values():
        total.add((tally.memories, tally.judged, tally.successes, tally.scored, tally.score_sum, tally.big_score_sum))
    return {
        "group_by": req.group_by,
        "matched": total.memories + missing.memories,
        "without_field": missing.memories,
        "without_outcome": total.memories - total.judged,
        "groups": [_describe(key, groups[key]) for key in sorted(groups, key=lambda key: _sort_key(key, groups[key]))],
    }


