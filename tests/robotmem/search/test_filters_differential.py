"""Recall's exact parts, end to end on both stores, against an oracle written from the docs.

A control loop relies on these being exactly right: ``context_filter`` (the grammar of
docs/data-model.md#filter-grammar), ``since`` / ``until`` against ``occurred_at``,
``session_id``, ``collection``, forgotten memories never coming back, updated contexts
being the ones filtered, ``n``, and ``spatial_sort`` (nearest first, frames, ``max_distance``).
The oracle below is a plain reading of those docs over the records the test wrote; it
shares no code with robotmem (the compiler's own reference evaluator is
``filter_reference.py``; this one is written separately, from the documentation).

Every example writes its records into a collection of its own in one store per backend,
so collections are checked to be apart as well; coordinates of 1e-300 among them once made
PostgreSQL's later point writes fail. The query is empty (``filter_only``), so ranking cannot
interfere: the set is judged, and the order: newest first (``occurred_at``, then the higher
id), or with ``spatial_sort`` nearest first, equal distances the higher id first.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robotmem import Memory, ValidationError

T0 = 1_800_000_000.0
TIMES = (T0, T0 + 1, T0 + 1.5, T0 + 2, T0 + 10)
ALL = 100  # recall's largest n; every example holds fewer memories, so n=ALL returns the whole set
_MISSING = object()

# Scalars chosen to collide across types: 1 / 1.0 / "1" / true, 0 / false / "" / null, and
# numbers at the ends of the float range.
SCALARS: tuple[Any, ...] = (
    0, 1, 1.0, -1, 2.5, "1", "", "a", "B", "é", "日本", "10", "9", True, False, None,
    1e300, -1e300, 1e-300, 2**53, -(2**62), 0.1, -0.0, 5e-324, 1.7976931348623157e308, 1e16, 10**16,
    2**63 - 1, -(2**63), "Z", "z", "ä", "a\u0301", "\U0001F600", "\uFFFD", "ﬁ", "1.0", "NaN", "true", "null", " 1",
)
# Keys that are awkward for JSON paths: digits, unicode, spaces, quotes, brackets, '$' below the top.
KEYS: tuple[str, ...] = ("a", "b", "1", "0", "ü", "日", "a b", "k'q", 'k"q', "k\\q", "[0]", "x[1]", "*", "#", "-1",
                         "null", "@", "/", "\t", "\U0001F600", "$")
NESTED_KEYS = (*KEYS, "$e")


def _leaf() -> st.SearchStrategy[Any]:
    return st.one_of(st.sampled_from(SCALARS), st.lists(st.sampled_from(SCALARS), max_size=2))


def _object(depth: int) -> st.SearchStrategy[dict[str, Any]]:
    value = _leaf() if depth == 0 else st.one_of(_leaf(), _leaf(), _object(depth - 1))
    return st.dictionaries(st.sampled_from(NESTED_KEYS), value, max_size=3)


# A dotted key ("a.b") a dot path cannot name: {"a.b": 1} must not match the filter {"a.b": 1}.
CONTEXTS = st.dictionaries(st.sampled_from((*KEYS, "a.b")), st.one_of(_leaf(), _object(2)), max_size=4)

GRID = st.integers(min_value=-3, max_value=3).map(float)
# Coordinates that are no number (true, "1") or beyond the 1e15 bound make no point.
COORDS = st.one_of(GRID, GRID, GRID, st.sampled_from(
    (0.1, 0.2, 0.3, 1e15, -1e15, 1e15 - 1, 2e15, 1e-300, -1e-200, 5e-324, 1e-100, 1e-90, True, "1")))
POINTS = st.one_of(
    st.lists(COORDS, min_size=2, max_size=3),
    st.fixed_dictionaries({"x": GRID, "y": GRID}),
    st.fixed_dictionaries({"x": GRID, "y": GRID, "z": GRID}),
)
FRAMES = st.sampled_from((_MISSING, None, "map", "odom", "", 5))


@st.composite
def _spatial(draw: st.DrawFn) -> dict[str, Any] | None:
    if draw(st.integers(0, 4)) == 0:
        return None
    spatial: dict[str, Any] = {"pos": draw(POINTS)}
    frame = draw(FRAMES)
    if frame is not _MISSING:
        spatial["frame"] = frame
    return spatial


TWIN = "the gripper slipped on the wet glass beaker near the kitchen sink during pick"
_SUPERSEDED = "superseded"


@dataclass
class Record:
    """One memory as the test wrote it: what the oracle reads."""

    text: str
    context: dict[str, Any]
    occurred_at: float
    session: int | None
    perception: bool
    forget: bool = False
    new_context: dict[str, Any] | None = None
    memory_id: int = 0
    outcome: float | None = None  # the score end_session attached as episode.outcome
    status: str = "active"

    @property
    def final_context(self) -> dict[str, Any]:
        context = self.context if self.new_context is None else self.new_context
        if self.outcome is None:
            return context
        return {**context, "episode": {"outcome": self.outcome}}


@st.composite
def _records(draw: st.DrawFn) -> list[Record]:
    records = []
    for i in range(draw(st.integers(1, 14))):
        context = draw(CONTEXTS)
        spatial = draw(_spatial())
        if spatial is not None:
            context["spatial"] = spatial
        new_context = None
        if draw(st.integers(0, 5)) == 0:
            new_context = draw(CONTEXTS)
            moved = draw(_spatial())
            if moved is not None:
                new_context["spatial"] = moved
        # Near-duplicate facts of the ended episode: consolidation may merge them (superseded).
        twin = draw(st.integers(0, 3)) == 0
        text = f"{TWIN} {chr(97 + i)}x" if twin else f"record {i} of the differential test"
        records.append(Record(
            text=text, context=context, occurred_at=draw(st.sampled_from(TIMES)),
            session=draw(st.sampled_from((None, 0, 1))), perception=draw(st.booleans()),
            forget=draw(st.integers(0, 5)) == 0, new_context=new_context))
    return records


# ---- the oracle, from docs/data-model.md -------------------------------------------------

def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _at(context: Any, path: str) -> Any:
    """The value at a dot path: object keys only, a list is not traversed."""
    node = context
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return _MISSING
        node = node[key]
    return node


def _equal(value: Any, operand: Any) -> bool:
    """Same type and value: true does not match 1; 5 matches 5.0; a list never equals a scalar."""
    if value is _MISSING or isinstance(value, list | dict):
        return False
    if _number(value) and _number(operand):
        return value == operand
    return type(value) is type(operand) and value == operand


def _order(value: Any, operand: Any, op: str) -> bool:
    """Numbers with numbers, strings with strings; other types never match."""
    if not ((_number(value) and _number(operand)) or (isinstance(value, str) and isinstance(operand, str))):
        return False
    return {"$gt": value > operand, "$gte": value >= operand, "$lt": value < operand, "$lte": value <= operand}[op]


def _holds(context: dict[str, Any], spec: dict[str, Any]) -> bool:
    for key, clause in spec.items():
        if key == "$and":
            if not all(_holds(context, part) for part in clause):
                return False
            continue
        if key == "$or":
            if not any(_holds(context, part) for part in clause):
                return False
            continue
        value = _at(context, key)
        ops = clause if isinstance(clause, dict) else {"$eq": clause}
        for op, operand in ops.items():
            if op == "$eq":
                ok = _equal(value, operand)
            elif op == "$ne":
                ok = not _equal(value, operand)
            elif op == "$in":
                ok = any(_equal(value, o) for o in operand)
            elif op == "$nin":
                ok = not any(_equal(value, o) for o in operand)
            elif op == "$exists":
                ok = (value is not _MISSING) == operand
            else:
                ok = _order(value, operand, op)
            if not ok:
                return False
    return True


def _refused_key(spec: dict[str, Any]) -> str | None:
    """A filter key read as an unknown operator (a dot path starting with '$'), which is refused."""
    for key, clause in spec.items():
        if key in ("$and", "$or"):
            for part in clause:
                bad = _refused_key(part)
                if bad is not None:
                    return bad
        elif key.startswith("$"):
            return key
    return None


def _coordinate(value: float) -> float:
    """A coordinate under 1e-100 in magnitude counts as 0, in a point and a target alike."""
    return 0.0 if abs(value) < 1e-100 else float(value)


def _point(value: Any) -> tuple[float, float, float | None] | None:
    """A point as docs/data-model.md#context defines one; z None when it has none."""
    def coordinate(v: Any) -> bool:
        return _number(v) and abs(v) <= 1e15

    if isinstance(value, list) and len(value) in (2, 3) and all(coordinate(v) for v in value):
        return (_coordinate(value[0]), _coordinate(value[1]), _coordinate(value[2]) if len(value) == 3 else None)
    if isinstance(value, dict) and coordinate(value.get("x")) and coordinate(value.get("y")):
        z = value.get("z")
        if _number(z) and not coordinate(z):
            return None  # a z beyond the bound: no point; a z that is no number sits at 0
        return (_coordinate(value["x"]), _coordinate(value["y"]), _coordinate(z) if _number(z) else 0.0)
    return None


def _distance(point: tuple[float, float, float | None], target: list[float]) -> float:
    """2-D points against a 3-D target sit at z = 0; a 3-D point against a 2-D target: x and y alone."""
    at = [_coordinate(t) for t in target]
    if len(at) == 2:
        return math.dist(point[:2], at)
    return math.dist((point[0], point[1], point[2] or 0.0), at)


# ---- generated requests -------------------------------------------------------------------

PATHS = st.one_of(
    st.sampled_from(KEYS),
    st.tuples(st.sampled_from(KEYS), st.sampled_from(NESTED_KEYS)).map(".".join),
    st.tuples(st.sampled_from(KEYS), st.sampled_from(NESTED_KEYS), st.sampled_from(NESTED_KEYS)).map(".".join),
    st.just("a.b"), st.just("spatial.frame"), st.just("spatial.pos.x"),
)
SCALAR = st.sampled_from(SCALARS)
ORDERED = st.sampled_from([s for s in SCALARS if _number(s) or isinstance(s, str)])
OPERATORS = st.one_of(
    SCALAR,
    st.fixed_dictionaries({"$eq": SCALAR}),
    st.fixed_dictionaries({"$ne": SCALAR}),
    st.dictionaries(st.sampled_from(("$gt", "$gte", "$lt", "$lte")), ORDERED, min_size=1, max_size=2),
    st.fixed_dictionaries({"$in": st.lists(SCALAR, min_size=1, max_size=4)}),
    st.fixed_dictionaries({"$nin": st.lists(SCALAR, min_size=1, max_size=4)}),
    st.fixed_dictionaries({"$exists": st.booleans()}),
)
CLAUSES = st.dictionaries(PATHS, OPERATORS, min_size=1, max_size=2)
FILTERS = st.recursive(
    CLAUSES,
    lambda inner: st.one_of(
        st.fixed_dictionaries({"$and": st.lists(inner, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"$or": st.lists(inner, min_size=1, max_size=3)}),
    ),
    max_leaves=4,
)


@dataclass
class Request:
    context_filter: dict[str, Any] | None
    since: float | None
    until: float | None
    session: int | None
    n: int
    spatial: dict[str, Any] | None = field(default=None)


@st.composite
def _requests(draw: st.DrawFn) -> Request:
    spatial = None
    if draw(st.booleans()):
        target = st.one_of(GRID, GRID, st.sampled_from((0.1, 0.2, 1e15, -1e15, 1e-200, 1e-90)))
        spatial = {"field": "spatial.pos", "target": draw(st.lists(target, min_size=2, max_size=3))}
        if draw(st.booleans()):
            # "edge": the distance of a stored point, so that one lies exactly on the bound
            spatial["max_distance"] = draw(st.sampled_from((0.0, 1.0, 2.0, 5.0, 0.1, 0.3, 1e15, 4e15, 1e-300, "edge")))
        frame = draw(st.sampled_from((_MISSING, "map", "odom")))
        if frame is not _MISSING:
            spatial["frame"] = frame
    return Request(
        context_filter=draw(st.one_of(st.none(), FILTERS)),
        since=draw(st.one_of(st.none(), st.sampled_from(TIMES))),
        until=draw(st.one_of(st.none(), st.sampled_from(TIMES))),
        session=draw(st.sampled_from((None, None, 0, 1))),
        n=draw(st.sampled_from((ALL, ALL, 1, 3))),
        spatial=spatial,
    )


# ---- the stores ---------------------------------------------------------------------------

@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    path: Any = (request.getfixturevalue("module_postgres_url") if request.param == "postgresql"
                 else tmp_path_factory.mktemp("differential") / "memory.db")
    with Memory(path, embedder=None, clock=lambda: T0 + 100) as mem:
        yield mem


_collections = (f"diff{i}" for i in itertools.count())


def _write(mem: Memory, records: list[Record], outcome: float | None) -> tuple[str, list[str]]:
    collection = next(_collections)
    sessions = [mem.start_session(collection=collection)["session_id"] for _ in range(2)]
    for record in records:
        session = None if record.session is None else sessions[record.session]
        if record.perception:
            record.memory_id = mem.save_perception(
                record.text, perception_type="tactile", metadata=record.context, collection=collection,
                session_id=session, occurred_at=record.occurred_at)["memory_id"]
        else:
            record.memory_id = mem.learn(record.text, context=record.context, collection=collection,
                                         session_id=session, occurred_at=record.occurred_at)["memory_id"]
    for record in records:
        if record.new_context is not None:
            mem.update(record.memory_id, record.text + " (updated)", context=record.new_context)
        if record.forget:
            mem.forget(record.memory_id, "test: retracted")
    if outcome is not None:
        mem.end_session(sessions[1], outcome_score=outcome)
        for record in records:
            if record.session == 1:
                record.outcome = outcome
                # which near-duplicates consolidation merged is its own judgement; that a merged
                # memory never comes back is the rule checked here
                record.status = mem.get(record.memory_id)["status"]
    return collection, sessions


def _expected(records: list[Record], request: Request) -> list[tuple[Record, float | None]]:
    """The records recall must return, each with its distance (None: not compared)."""
    chosen = []
    for record in records:
        if record.forget or record.status == _SUPERSEDED or (request.session is not None and record.session != request.session):
            continue
        if request.since is not None and record.occurred_at < request.since:
            continue
        if request.until is not None and record.occurred_at > request.until:
            continue
        context = record.final_context
        if request.context_filter is not None and not _holds(context, request.context_filter):
            continue
        distance = None
        if request.spatial is not None:
            point = _point(_at(context, "spatial.pos"))
            frame = _at(context, "spatial.frame")
            wanted = request.spatial.get("frame", _MISSING)
            in_frame = wanted is _MISSING or frame in (_MISSING, None) or (isinstance(frame, str) and frame == wanted)
            if point is not None and in_frame:
                distance = _distance(point, request.spatial["target"])
            if "max_distance" in request.spatial and (distance is None or distance > request.spatial["max_distance"]):
                continue
        chosen.append((record, distance))
    return chosen


def _bound_on_a_point(records: list[Record], request: Request) -> None:
    """Replace an "edge" max_distance by the exact distance of one of the records' points."""
    if request.spatial is None or request.spatial.get("max_distance") != "edge":
        return
    distances = [_distance(p, request.spatial["target"]) for p in
                 (_point(_at(r.final_context, "spatial.pos")) for r in records) if p is not None]
    request.spatial["max_distance"] = max(distances, default=1.0)


def _recall(mem: Memory, collection: str, sessions: list[str], request: Request) -> dict[str, Any]:
    return mem.recall(
        "", collection=collection, n=request.n, context_filter=request.context_filter,
        since=request.since, until=request.until, spatial_sort=request.spatial,
        session_id=None if request.session is None else sessions[request.session])


def _check(result: dict[str, Any], expected: list[tuple[Record, float | None]], request: Request) -> None:
    by_id = {record.memory_id: (record, distance) for record, distance in expected}
    got = [hit["id"] for hit in result["results"]]
    assert result["count"] == len(got)
    assert len(got) == len(set(got)), f"a memory returned twice: {got}"
    assert set(got) <= set(by_id), f"extra {sorted(set(got) - set(by_id))}"
    assert len(got) == min(request.n, len(expected)), f"missing {sorted(set(by_id) - set(got))}"
    for hit in result["results"]:
        record, _ = by_id[hit["id"]]
        assert hit["context"] == record.final_context
        assert hit["occurred_at"] == record.occurred_at
    if request.spatial is None:
        # Newest first: by occurred_at, then the newer memory (the higher id); the first n of that.
        newest = sorted(by_id, key=lambda i: (-by_id[i][0].occurred_at, -i))
        assert got == newest[:request.n], f"not newest first: {got}, expected {newest[:request.n]}"
        return
    # Nearest first, equal distances newer memory (higher id) first; then the memories not compared.
    compared = sorted((i for i in by_id if by_id[i][1] is not None), key=lambda i: (by_id[i][1], -i))
    assert got[:len(compared)] == compared[:request.n], (
        f"not nearest first: {[(i, by_id[i][1]) for i in got]}, expected {[(i, by_id[i][1]) for i in compared]}")
    for hit in result["results"]:
        want = by_id[hit["id"]][1]
        if want is None:
            assert hit.get("distance") is None
        else:
            assert hit["distance"] == pytest.approx(want, rel=1e-12, abs=1e-9)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=_records(), requests=st.lists(_requests(), min_size=1, max_size=6),
       outcome=st.sampled_from((None, None, 0.0, 1.0, 0.25)))
def test_recall_returns_exactly_what_the_documented_rules_select(
        store: Memory, records: list[Record], requests: list[Request], outcome: float | None) -> None:
    collection, sessions = _write(store, records, outcome)
    for request in requests:
        _bound_on_a_point(records, request)
        if (request.context_filter is None and request.spatial is None and request.session is None
                and request.since is None and request.until is None):
            request.since = 0.0  # a window of all time: recall without a filter is refused for an empty query
        bad = None if request.context_filter is None else _refused_key(request.context_filter)
        if bad is not None:
            with pytest.raises(ValidationError) as refused:
                _recall(store, collection, sessions, request)
            assert refused.value.field is not None and refused.value.field.startswith("context_filter")
            assert refused.value.field.endswith(f".{bad}")
            continue
        if request.since is not None and request.until is not None and request.since > request.until:
            with pytest.raises(ValidationError) as refused:
                _recall(store, collection, sessions, request)
            assert refused.value.field == "since"
            continue
        _check(_recall(store, collection, sessions, request), _expected(records, request), request)
