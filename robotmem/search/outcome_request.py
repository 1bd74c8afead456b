"""An outcome-statistics request, and what both stores' counting shares.

The semantics are robotmem.search.outcomes'; this module holds the validated request,
the row shape a store returns, the conditions that read the same on both stores and the
spatial neighbourhood, so that the two stores' modules (robotmem.search.outcomes_sqlite,
robotmem.search.outcomes_postgres) and the module that dispatches to them
(robotmem.search.outcomes) all import from here, in one direction.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from .. import validation
from ..errors import ValidationError
from ..store.tokens import match_term, query_tokens
from .filters import CompiledFilter, compile_filter, json_path
from .request import SpatialSort, parse_spatial_sort

__all__ = ["BIG_SCORE", "BIG_SCORE_SCALE", "OutcomeRequest", "PointsInBox", "Row", "build_outcome_request",
           "common_conditions", "neighbourhood"]

MAX_K = 100_000
MAX_BINS = 1000
# Small first box: a control loop asks for tens to hundreds of neighbours in a dense store.
_FIRST_RADIUS = 0.02
_GROWTH = 2.0
_MAX_RADIUS = 1e6

#: One group as a store counts it: (JSON type in SQLite's names, value, memories, verdicts,
#: successes, scores, sum of the scores below BIG_SCORE in magnitude, sum of the others times
#: BIG_SCORE_SCALE); the JSON type is None for memories without the field.
Row = tuple[Any, ...]

# Scores are summed in two parts so that no sum overflows (two outcomes of 1e308 summed to inf on
# SQLite and failed on PostgreSQL): fewer than 2**63 scores under 2**960 sum to under 2**1023, and
# so do the others scaled by 2**-64 (exactly: they stay far above the subnormal range).
BIG_SCORE = 2.0**960
BIG_SCORE_SCALE = 2.0**-64


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
    if not validation.unicode_text(query, "query").strip():
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
