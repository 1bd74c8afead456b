"""A validated recall request: what recall() receives after the boundary checks."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .. import validation
from ..errors import ValidationError
from ..models import DEFAULT_MIN_RELEVANCE
from ..store.points import MAX_COORDINATE, MAX_DISTANCE, index_coordinate
from .filters import CompiledFilter, compile_for, json_path

__all__ = ["RecallRequest", "SpatialSort", "parse_spatial_sort"]


@dataclass(frozen=True)
class SpatialSort:
    field: str
    json_path: str
    target: tuple[float, ...]
    max_distance: float | None
    #: the target's frame: only memories in it (or of unknown frame) are distance-compared
    frame: str | None = None
    #: where a memory names its frame: ``frame`` beside the sorted field (spatial.position -> spatial.frame)
    frame_path: str | None = None


@dataclass(frozen=True)
class RecallRequest:
    query: str
    collection: str
    n: int
    min_confidence: float
    session_id: str | None = None
    filter: CompiledFilter | None = None
    spatial: SpatialSort | None = None
    since: float | None = None
    until: float | None = None
    #: hits of a query whose relevance is below this are left out (spatial order keeps them)
    min_relevance: float = DEFAULT_MIN_RELEVANCE

    @property
    def include_archived(self) -> bool:
        # Archived memories decayed below the floor; asking for min_confidence=0 asks for them too.
        return self.min_confidence == 0.0

    @property
    def narrowed(self) -> bool:
        """The caller restricted the set explicitly (filter, session or time window)."""
        return self.needs_sql_candidates or self.since is not None or self.until is not None

    @property
    def needs_sql_candidates(self) -> bool:
        return self.filter is not None or self.session_id is not None


def parse_spatial_sort(value: Any) -> SpatialSort | None:
    spec = validation.json_object(value, "spatial_sort")
    if spec is None:
        return None
    unknown = set(spec) - {"field", "target", "max_distance", "frame"}
    if unknown:
        raise ValidationError(f"spatial_sort: unknown key(s) {', '.join(sorted(unknown))}", field="spatial_sort")
    field = spec.get("field")
    if not isinstance(field, str):
        raise ValidationError("spatial_sort.field must be a dot path such as 'spatial.object_position'",
                              field="spatial_sort.field")
    path = json_path(field, "spatial_sort.field")
    target = spec.get("target")
    if (
        not isinstance(target, list)
        or len(target) not in (2, 3)
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in target)
    ):
        raise ValidationError("spatial_sort.target must be [x, y] or [x, y, z] finite numbers",
                              field="spatial_sort.target")
    if not all(-MAX_COORDINATE <= v <= MAX_COORDINATE for v in target):
        raise ValidationError(f"spatial_sort.target coordinates must be at most {MAX_COORDINATE:g} in magnitude "
                              "(a point's bound)", field="spatial_sort.target")
    max_distance = spec.get("max_distance")
    if max_distance is not None and (
        isinstance(max_distance, bool) or not isinstance(max_distance, (int, float))
        or not math.isfinite(max_distance) or max_distance < 0
    ):
        raise ValidationError("spatial_sort.max_distance must be a finite number >= 0",
                              field="spatial_sort.max_distance")
    if max_distance is not None and max_distance > MAX_DISTANCE:
        raise ValidationError(f"spatial_sort.max_distance must be at most {MAX_DISTANCE:g} (farther than any two "
                              "points can be apart)", field="spatial_sort.max_distance")
    frame = spec.get("frame")
    if frame is not None and (not isinstance(frame, str) or not frame.strip()):
        raise ValidationError("spatial_sort.frame must be a non-empty frame name such as 'map'",
                              field="spatial_sort.frame")
    if frame is not None and "\x00" in frame:
        raise ValidationError("spatial_sort.frame holds a NUL character (\\x00), which no stored frame name holds",
                              field="spatial_sort.frame")
    parent = field.rpartition(".")[0]
    return SpatialSort(
        field=field,
        json_path=path,
        # as the points are indexed: a target at 1e-200 whose distance to the origin was shown as 0 (the
        # square underflows) dropped that point under max_distance 0
        target=tuple(index_coordinate(v) for v in target),
        max_distance=None if max_distance is None else float(max_distance),
        frame=frame,
        frame_path=json_path(f"{parent}.frame" if parent else "frame", "spatial_sort.field"),
    )


def build_request(
    *,
    query: Any,
    collection: str,
    n: Any,
    min_confidence: Any,
    session_id: Any,
    context_filter: Any,
    spatial_sort: Any,
    since: Any,
    until: Any,
    min_relevance: Any = None,
    dialect: str = "sqlite",
) -> RecallRequest:
    """The validated request; its filter is compiled for the store's SQL ``dialect``."""
    if query is None:
        query = ""
    if not isinstance(query, str):
        raise ValidationError(f"query must be a string, got {type(query).__name__}", field="query")
    if len(query) > 2000:
        raise ValidationError("query is longer than 2000 characters", field="query")
    validation.unicode_text(query, "query")
    spec = validation.json_object(context_filter, "context_filter")
    # compile_for: SQLite's filter carries its leaf-index candidate sets (selective filters read an index).
    compiled = compile_for(spec, dialect) if spec else None
    request = RecallRequest(
        query=query.strip(),
        collection=collection,
        n=validation.recall_n(n),
        min_confidence=validation.unit_interval(min_confidence, "min_confidence"),
        session_id=None if session_id is None else validation.session_id(session_id),
        filter=compiled,
        spatial=parse_spatial_sort(spatial_sort),
        since=validation.timestamp(since, "since"),
        until=validation.timestamp(until, "until"),
        min_relevance=(DEFAULT_MIN_RELEVANCE if min_relevance is None
                       else validation.unit_interval(min_relevance, "min_relevance")),
    )
    if request.since is not None and request.until is not None and request.since > request.until:
        raise ValidationError("since is after until", field="since")
    narrowed = (
        request.filter or request.spatial or request.session_id or request.since is not None or request.until is not None
    )
    if not request.query and not narrowed:
        raise ValidationError(
            "query is empty; give a query, or a context_filter / spatial_sort / session_id / time window",
            field="query",
        )
    return request
