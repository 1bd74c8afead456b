"""Outcome statistics: "near situations like this one, how often did each value succeed?"

A control loop choosing a parameter needs counts over *all* matching experience, not
the ten best-ranked memories, so this is exact set arithmetic, not ranking:

1. the set: memories of the collection that are not forgotten (merged and archived
   memories are still experience that happened, unless the memory that absorbed them
   was forgotten), narrowed by a context filter, a time
   window, full text (every query word must occur) and a spatial neighbourhood
   (within ``max_distance`` of a point, or the ``k`` nearest);
2. each memory's verdict: ``task.success`` when it is true/false, else
   ``episode.outcome >= success_threshold`` when the episode was scored, else none;
3. groups by the value at ``group_by`` (numbers optionally binned), counted by SQL's
   GROUP BY, then binned and given a Wilson 95 % interval here.

A superseded memory left the full-text index when it was merged; it matches a query
when the memory that absorbed it does (a merge needs near-identical text).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import apsw

from .. import validation
from ..errors import ValidationError
from ..store.tokens import match_term, query_tokens
from .filters import CompiledFilter, compile_filter, json_path
from .request import SpatialSort, parse_spatial_sort

__all__ = ["OutcomeRequest", "build_outcome_request", "compute_outcome_stats", "wilson_interval"]

WILSON_Z = 1.959963984540054  # two-sided 95 %
MAX_K = 100_000
MAX_BINS = 1000
# Small first box: a control loop asks for tens to hundreds of neighbours in a dense store.
_FIRST_RADIUS = 0.02
_GROWTH = 2.0
_MAX_RADIUS = 1e6


@dataclass(frozen=True)
class OutcomeRequest:
    collection: str
    group_by: str
    group_path: str
    match: str | None = None
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


def _full_text_match(query: Any) -> str | None:
    if query is None:
        return None
    if not isinstance(query, str):
        raise ValidationError(f"query must be a string, got {type(query).__name__}", field="query")
    if len(query) > 2000:
        raise ValidationError("query is longer than 2000 characters", field="query")
    if not query.strip():
        return None
    tokens = query_tokens(query)
    if not tokens:
        raise ValidationError("query has no searchable words", field="query")
    return " AND ".join(match_term(t) for t in tokens)


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
    request = OutcomeRequest(
        collection=collection,
        group_by=group_by,
        group_path=json_path(group_by, "group_by"),
        match=_full_text_match(query),
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


# -- the set ---------------------------------------------------------------------------


def _set_sql(req: OutcomeRequest) -> tuple[str, list[Any]]:
    """WHERE clause over ``m`` for every condition except the spatial one."""
    parts = [
        "m.collection = ?", "m.status != 'forgotten'",
        # Forgetting a merged memory retracts the experience it absorbed as well.
        "(m.status != 'superseded' OR (SELECT s.status FROM memories s WHERE s.id = m.superseded_by) != 'forgotten')",
    ]
    params: list[Any] = [req.collection]
    if req.since is not None:
        parts.append("m.occurred_at >= ?")
        params.append(req.since)
    if req.until is not None:
        parts.append("m.occurred_at <= ?")
        params.append(req.until)
    if req.filter is not None:
        parts.append(req.filter.sql)
        params += list(req.filter.params)
    if req.match is not None:
        hits = "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?"
        parts.append(f"(m.id IN ({hits}) OR (m.status = 'superseded' AND m.superseded_by IN ({hits})))")
        params += [req.match, req.match]
    return " AND ".join(parts), params


def _distance(target: tuple[float, ...], x: float, y: float, z: float) -> float:
    if len(target) == 2:
        return math.hypot(x - target[0], y - target[1])
    return math.sqrt((x - target[0]) ** 2 + (y - target[1]) ** 2 + (z - target[2]) ** 2)


def _within(conn: apsw.Connection, req: OutcomeRequest, radius: float | None) -> dict[int, float]:
    """Eligible memory ids with a point inside the box of half-width ``radius`` -> nearest distance."""
    spatial = req.spatial
    assert spatial is not None
    where, params = _set_sql(req)
    box, box_params = "", []
    if radius is not None:
        for axis, value in zip(("x", "y", "z"), spatial.target):
            box += f" AND r.max{axis} >= ? AND r.min{axis} <= ?"
            box_params += [value - radius, value + radius]
    rows = conn.execute(
        "SELECT r.memory_id, r.px, r.py, r.pz FROM spatial_points r JOIN memories m ON m.id = r.memory_id "
        f"WHERE r.field = ?{box} AND {where}",
        [spatial.field, *box_params, *params],
    )
    best: dict[int, float] = {}
    for memory_id, x, y, z in rows:
        d = _distance(spatial.target, x, y, z)
        if d < best.get(memory_id, math.inf):
            best[memory_id] = d
    return best


def _next_radius(radius: float, inside: int, k: int) -> float | None:
    """Grow at least x2; more when the points found so far say k lie much farther (density ~ area)."""
    growth = max(_GROWTH, 1.25 * math.sqrt(k / inside)) if inside else _GROWTH * 2
    return radius * growth if radius * growth <= _MAX_RADIUS else None


def _neighbourhood(conn: apsw.Connection, req: OutcomeRequest) -> list[int]:
    """Ids within max_distance, or the k nearest (ties broken by newer id), or both."""
    spatial = req.spatial
    assert spatial is not None
    if spatial.max_distance is not None:
        found = _within(conn, req, spatial.max_distance)
        inside = [(m, d) for m, d in found.items() if d <= spatial.max_distance]
    else:
        # Grow a box until k points lie within its half-width: every point outside is farther.
        radius: float | None = _FIRST_RADIUS
        while True:
            found = _within(conn, req, radius)
            inside = [(m, d) for m, d in found.items() if radius is None or d <= radius]
            if radius is None or len(inside) >= (req.k or 0):
                break
            radius = _next_radius(radius, len(inside), req.k or 0)
    inside.sort(key=lambda r: (r[1], -r[0]))
    return [m for m, _ in (inside[: req.k] if req.k is not None else inside)]


# -- counting --------------------------------------------------------------------------


def _group_sql(req: OutcomeRequest, where: str, params: list[Any]) -> tuple[str, list[Any]]:
    success = (
        "CASE json_type(m.context, '$.task.success') WHEN 'true' THEN 1 WHEN 'false' THEN 0 ELSE "
        "CASE WHEN json_type(m.context, '$.episode.outcome') IN ('integer', 'real') "
        "THEN json_extract(m.context, '$.episode.outcome') >= ? END END"
    )
    outcome = ("CASE WHEN json_type(m.context, '$.episode.outcome') IN ('integer', 'real') "
               "THEN json_extract(m.context, '$.episode.outcome') END")
    inner = (
        f"SELECT json_type(m.context, ?) AS gt, json_extract(m.context, ?) AS gv, {success} AS ok, "
        f"{outcome} AS score FROM memories m WHERE {where}"
    )
    totals = "count(*), count(ok), coalesce(sum(ok), 0), count(score), coalesce(sum(score), 0.0)"
    return (
        f"SELECT gt, gv, {totals} FROM ({inner}) GROUP BY gt, gv",
        [req.group_path, req.group_path, req.success_threshold, *params],
    )


@dataclass
class _Tally:
    memories: int = 0
    judged: int = 0
    successes: int = 0
    scored: int = 0
    score_sum: float = 0.0

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


def _group(req: OutcomeRequest, rows: list[tuple[Any, ...]]) -> tuple[dict[Any, _Tally], _Tally, list[Any]]:
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
            # 5 and 5.0 are one group, as they are one value to the filter grammar.
            identity = float(value) if gt in ("integer", "real") else value
            key = ("value", json.dumps(identity, sort_keys=True), value)
        groups.setdefault(key, _Tally()).add(counts)
    bin_keys = [("bin", pair) for pair in pairwise(edges)] if edges is not None else []
    for key in bin_keys:
        groups.setdefault(key, _Tally())
    return groups, missing, bin_keys


def _sort_key(key: Any) -> tuple[Any, ...]:
    if key[0] == "bin":
        lo, hi = key[1]
        return (0, -math.inf if lo is None else lo, math.inf if hi is None else hi)
    value = key[2]
    if isinstance(value, bool):
        return (2, int(value))
    if isinstance(value, (int, float)):
        return (1, value)
    return (3, key[1])


def _describe(key: Any, tally: _Tally) -> dict[str, Any]:
    interval = wilson_interval(tally.successes, tally.judged)
    group: dict[str, Any] = {"bin": list(key[1])} if key[0] == "bin" else {"value": key[2]}
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


def compute_outcome_stats(conn: apsw.Connection, req: OutcomeRequest) -> dict[str, Any]:
    where, params = _set_sql(req)
    if req.spatial is not None:
        ids = _neighbourhood(conn, req)
        where, params = "m.id IN (SELECT value FROM json_each(?))", [json.dumps(ids)]
    q, p = _group_sql(req, where, params)
    rows = [tuple(row) for row in conn.execute(q, p)]
    groups, missing, _ = _group(req, rows)
    total = _Tally()
    for tally in groups.values():
        total.add((tally.memories, tally.judged, tally.successes, tally.scored, tally.score_sum))
    return {
        "group_by": req.group_by,
        "matched": total.memories + missing.memories,
        "without_field": missing.memories,
        "without_outcome": total.memories - total.judged,
        "groups": [_describe(key, groups[key]) for key in sorted(groups, key=_sort_key)],
    }
