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
   value to the filter grammar; numbers optionally binned), each with its count of
   memories, of verdicts, of successes, of scores and their sum; binned and given a
   Wilson 95 % interval here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from .. import validation
from ..errors import ValidationError
from ..store.backend import dialect_of
from ..store.tokens import match_term, query_tokens
from .filters import CompiledFilter, compile_filter, json_path
from .request import SpatialSort, parse_spatial_sort

if TYPE_CHECKING:
    from .leaf_columns import LeafColumns

__all__ = ["OutcomeRequest", "PointsInBox", "Row", "build_outcome_request", "common_conditions", "compute_outcome_stats", "neighbourhood",
           "wilson_interval"]

WILSON_Z = 1.959963984540054  # two-sided 95 %
MAX_K = 100_000
MAX_BINS = 1000
# Small first box: a control loop asks for tens to hundreds of neighbours in a dense store.
_FIRST_RADIUS = 0.02
_GROWTH = 2.0
_MAX_RADIUS = 1e6

#: One group as a store counts it: (JSON type in SQLite's names, value, memories, verdicts,
#: successes, scores, sum of scores); the JSON type is None for memories without the field.
Row = tuple[Any, ...]


@dataclass(frozen=True)
class OutcomeRequest:
    collection: str
    group_by: str
    group_path: str
    #: the query's tokens (every one must occur) and the same as an FTS5 expression
    tokens: tuple[str, ...] = ()
    match: str | None = None
    #: the validated filter, and its SQLite compilation (PostgreSQL compiles ``filter_spec``)
    filter_spec: dict[str, Any] | None = None
    filter: CompiledFilter | None = None
    spatial: SpatialSort | None = None
    k: int | None = None
    bins: int | tuple[float, ...] | None = None
    success_threshold: float = 0.5
    since: float | None = None
    until: float | None = None


def wilson_interval(successes: int, n: int, z: float = WILSON_Z) -> tuple[float, float] | None:
    """Wilson score interval for a binomial proportion; None when there is nothing to estimate."""
    if n <= 0:
        return None
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


# -- validation ------------------------------------------------------------------------


def _bins(value: Any) -> int | tuple[float, ...] | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return validation.integer(value, "bins", low=1, high=MAX_BINS)
    if isinstance(value, (list, tuple)):
        if not 2 <= len(value) <= MAX_BINS + 1:
            raise ValidationError(f"bins as edges takes 2 to {MAX_BINS + 1} numbers", field="bins")
        edges = []
        for i, edge in enumerate(value):
            if isinstance(edge, bool) or not isinstance(edge, (int, float)) or not math.isfinite(edge):
                raise ValidationError(f"bins[{i}] must be a finite number", field=f"bins[{i}]")
            edges.append(float(edge))
        if any(b <= a for a, b in pairwise(edges)):
            raise ValidationError("bins edges must be strictly increasing", field="bins")
        return tuple(edges)
    raise ValidationError("bins must be a number of bins or a list of increasing edges", field="bins")


def _query_tokens(query: Any) -> tuple[str, ...]:
    if query is None:
        return ()
    if not isinstance(query, str):
        raise ValidationError(f"query must be a string, got {type(query).__name__}", field="query")
    if len(query) > 2000:
        raise ValidationError("query is longer than 2000 characters", field="query")
    if not query.strip():
        return ()
    tokens = query_tokens(query)
    if not tokens:
        raise ValidationError("query has no searchable words", field="query")
    return tuple(tokens)


def build_outcome_request(
    *, group_by: Any, collection: str, query: Any = None, context_filter: Any = None, spatial_sort: Any = None,
    k: Any = None, bins: Any = None, success_threshold: Any = 0.5, since: Any = None, until: Any = None,
) -> OutcomeRequest:
    if not isinstance(group_by, str):
        raise ValidationError("group_by must be a dot path such as 'params.push_factor'", field="group_by")
    spec = validation.json_object(context_filter, "context_filter")
    spatial = parse_spatial_sort(spatial_sort)
    count = None if k is None else validation.integer(k, "k", low=1, high=MAX_K)
    if count is not None and spatial is None:
        raise ValidationError("k (nearest) needs a spatial_sort to measure distance from", field="k")
    if spatial is not None and spatial.max_distance is None and count is None:
        raise ValidationError("spatial_sort needs max_distance or k to bound the neighbourhood",
                              field="spatial_sort.max_distance")
    tokens = _query_tokens(query)
    request = OutcomeRequest(
        collection=collection,
        group_by=group_by,
        group_path=json_path(group_by, "group_by"),
        tokens=tokens,
        match=" AND ".join(match_term(t) for t in tokens) if tokens else None,
        filter_spec=spec or None,
        filter=compile_filter(spec) if spec else None,
        spatial=spatial,
        k=count,
        bins=_bins(bins),
        success_threshold=validation.unit_interval(success_threshold, "success_threshold"),
        since=validation.timestamp(since, "since"),
        until=validation.timestamp(until, "until"),
    )
    if request.since is not None and request.until is not None and request.since > request.until:
        raise ValidationError("since is after until", field="since")
    return request


# -- the neighbourhood (both stores) ----------------------------------------------------

#: Eligible memory ids with a point inside the box of half-width ``radius`` (every point for
#: None) -> the distance of their nearest such point to the target.
PointsInBox = Callable[[float | None], dict[int, float]]


def _next_radius(radius: float, inside: int, k: int) -> float | None:
    """Grow at least x2; more when the points found so far say k lie much farther (density ~ area)."""
    growth = max(_GROWTH, 1.25 * math.sqrt(k / inside)) if inside else _GROWTH * 2
    return radius * growth if radius * growth <= _MAX_RADIUS else None


def neighbourhood(req: OutcomeRequest, points: PointsInBox) -> list[int]:
    """Ids within max_distance, or the k nearest (ties broken by newer id), or both."""
    spatial = req.spatial
    assert spatial is not None
    if spatial.max_distance is not None:
        found = points(spatial.max_distance)
        inside = [(m, d) for m, d in found.items() if d <= spatial.max_distance]
    else:
        # Grow a box until k points lie within its half-width: every point outside is farther.
        radius: float | None = _FIRST_RADIUS
        while True:
            found = points(radius)
            inside = [(m, d) for m, d in found.items() if radius is None or d <= radius]
            if radius is None or len(inside) >= (req.k or 0):
                break
            radius = _next_radius(radius, len(inside), req.k or 0)
    inside.sort(key=lambda r: (r[1], -r[0]))
    return [m for m, _ in (inside[: req.k] if req.k is not None else inside)]


# -- counting --------------------------------------------------------------------------


@dataclass
class _Tally:
    memories: int = 0
    judged: int = 0
    successes: int = 0
    scored: int = 0
    score_sum: float = 0.0
    #: the group's value as first seen (5 or 5.0: one group)
    shown: Any = None

    def add(self, row: Sequence[Any]) -> None:
        self.memories += row[0]
        self.judged += row[1]
        self.successes += row[2]
        self.scored += row[3]
        self.score_sum += row[4]


def _json_value(kind: str, value: Any) -> Any:
    if kind in ("true", "false"):
        return kind == "true"
    if kind in ("object", "array"):
        return json.loads(value)
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
    step = (high - low) / count
    return tuple(low + i * step for i in range(count)) + (high,)


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
            # 5 and 5.0 (and -0.0 and 0) are one group, as they are one value to the filter grammar.
            identity = float(value) + 0.0 if gt in ("integer", "real") else value
            key = ("value", json.dumps(identity, sort_keys=True))
            groups.setdefault(key, _Tally(shown=value))
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
        mean_outcome=None if not tally.scored else tally.score_sum / tally.scored,
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
        from .outcomes_postgres import postgres_rows

        rows = postgres_rows(conn, req)
    else:
        from .outcomes_sqlite import sqlite_rows

        rows = sqlite_rows(conn, req, use_index=plan == "index", columns=columns)
    groups, missing, _ = _group(req, rows)
    total = _Tally()
    for tally in groups.values():
        total.add((tally.memories, tally.judged, tally.successes, tally.scored, tally.score_sum))
    return {
        "group_by": req.group_by,
        "matched": total.memories + missing.memories,
        "without_field": missing.memories,
        "without_outcome": total.memories - total.judged,
        "groups": [_describe(key, groups[key]) for key in sorted(groups, key=lambda key: _sort_key(key, groups[key]))],
    }


def common_conditions(req: OutcomeRequest) -> tuple[list[str], list[Any]]:
    """The set's conditions over ``m`` that read the same on both stores: collection, not
    forgotten (nor absorbed by a memory that was), the time window."""
    parts = [
        "m.collection = ?", "m.status <> 'forgotten'",
        # Forgetting a merged memory retracts the experience it absorbed as well.
        "(m.status <> 'superseded' OR (SELECT s.status FROM memories s WHERE s.id = m.superseded_by) <> 'forgotten')",
    ]
    params: list[Any] = [req.collection]
    if req.since is not None:
        parts.append("m.occurred_at >= ?")
        params.append(req.since)
    if req.until is not None:
        parts.append("m.occurred_at <= ?")
        params.append(req.until)
    return parts, params
