"""Memory.outcome_stats against a plain-Python oracle over the same rows.

The oracle reads the raw rows (apsw, its own SQL), applies the filter with the
reference evaluator of the filter grammar, measures distances from the context values
itself, and counts in Python. Episodes are real: end_session attaches the outcome and
merges repeated facts, so superseded rows are part of the set being checked.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import subprocess
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

import apsw
import pytest
from filter_reference import lookup, matches
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_filters import _context as _random_context
from test_filters import filters

from robotmem import Memory, ValidationError
from robotmem.search import outcomes_sqlite
from robotmem.search.leaf_columns import LeafColumn, LeafColumns
from robotmem.search.outcomes_sqlite import JSON_SHARE, SMALL_SET
from robotmem.search.outcome_request import build_outcome_request
from robotmem.search.outcomes import compute_outcome_stats, wilson_interval

_MISSING = lookup({}, "x")
OBJECTS = ("slippery", "default", "heavy")
FACTORS = (0.25, 0.5, 1.0)
Z = 1.959963984540054
PLANS = ("index", "leaves", "scan")


def _context(rng: random.Random) -> dict[str, Any]:
    ctx: dict[str, Any] = {"object": {"type": rng.choice(OBJECTS)},
                           "spatial": {"object_position": [round(rng.uniform(0, 1), 3), round(rng.uniform(0, 1), 3)]}}
    roll = rng.random()
    if roll < 0.75:
        ctx["params"] = {"push_factor": rng.choice(FACTORS)}
    elif roll < 0.85:
        ctx["params"] = {"push_factor": rng.choice(["gentle", True, 1])}  # other types group by exact value
    if rng.random() < 0.7:
        ctx["task"] = {"success": rng.random() < 0.5}
    elif rng.random() < 0.2:
        ctx["task"] = {"success": "yes"}  # not a boolean: no verdict from task.success
    return ctx


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """About 300 memories in 60 episodes: merged repeats, forgotten ones, unscored episodes
    (a SQLite file or a PostgreSQL URL)."""
    if request.param == "postgresql":
        path: Any = request.getfixturevalue("module_postgres_url")
    else:
        path = tmp_path_factory.mktemp("outcomes") / "memory.db"
    rng = random.Random(16)
    with Memory(path, embedder=None) as mem:
        for episode in range(60):
            sid = mem.start_session(collection="push")["session_id"]
            for i in range(rng.randint(2, 7)):
                ctx = _context(rng)
                verb = rng.choice(["pushed", "nudged", "shoved"])
                # Repeated wording with equal params and success: consolidation merges these.
                text = f"{verb} the block with factor {ctx.get('params', {}).get('push_factor')}"
                if rng.random() < 0.3:
                    text += f" at step {episode}.{i}"
                mem.learn(text, context=ctx, session_id=sid)
            if rng.random() < 0.2:
                mem.save_perception("camera frame of the block", metadata={"object": {"type": "heavy"}},
                                    session_id=sid)
            mem.end_session(sid, outcome_score=None if rng.random() < 0.2 else round(rng.random(), 2))
        mem.learn("sessionless note: pushed the block with factor 0.5", context={"params": {"push_factor": 0.5}},
                  collection="push")
        mem.learn("another collection pushed", context={"params": {"push_factor": 0.5}}, collection="other")
        ids = [row[0] for row in mem._db.read().__enter__().execute(
            "SELECT id FROM memories WHERE status = 'active' ORDER BY id")]
        for memory_id in rng.sample(ids, 8):
            mem.forget(memory_id, "test: retracted")
    return path


def _rows(path: Any) -> list[dict[str, Any]]:
    """Every memory as stored, read through the store's own export (either backend)."""
    rows: list[dict[str, Any]] = []
    with Memory(path, embedder=None) as mem, mem._db.read() as conn:
        while batch := mem._db.iter_rows(conn, rows[-1]["id"] if rows else 0, 500):
            rows += batch
    return rows


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _bin(value: float, edges: list[float]) -> tuple[float | None, float | None]:
    if value < edges[0]:
        return (None, edges[0])
    if value > edges[-1]:
        return (edges[-1], None)
    for lo, hi in pairwise(edges):
        if lo <= value < hi:
            return (lo, hi)
    return (edges[-2], edges[-1])


def oracle(path: Any, group_by: str, *, query: str = "", context_filter: dict[str, Any] | None = None,
           near: tuple[list[float], float | None, int | None] | None = None, edges: list[float] | None = None,
           threshold: float = 0.5) -> dict[Any, dict[str, Any]]:
    rows = _rows(path)
    by_id = {r["id"]: r for r in rows}
    chosen = []
    for r in rows:
        if r["collection"] != "push" or r["status"] == "forgotten":
            continue
        if r["status"] == "superseded" and by_id[r["superseded_by"]]["status"] == "forgotten":
            continue
        if context_filter and not matches(r["context"], context_filter):
            continue
        if query:
            text_row = by_id[r["superseded_by"]] if r["status"] == "superseded" else r
            if not _words(query) <= _words(text_row["content"]):
                continue
        chosen.append(r)
    if near is not None:
        target, radius, k = near
        placed = []
        for r in chosen:
            point = lookup(r["context"], "spatial.object_position")
            if point is _MISSING:
                continue
            d = math.dist(point, target)
            if radius is None or d <= radius:
                placed.append((d, -r["id"], r))
        placed.sort(key=lambda t: (t[0], t[1]))
        chosen = [r for _, _, r in (placed[:k] if k is not None else placed)]
    groups: dict[Any, dict[str, Any]] = {}
    for r in chosen:
        value = lookup(r["context"], group_by)
        if value is _MISSING:
            continue
        is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if edges and is_number:
            key: Any = ("bin", _bin(value, edges))
        else:  # 1 and 1.0 are one value, as in the filter grammar; 2**53 and 2**53 + 1 two
            key = ("value", _exact(value))
        g = groups.setdefault(key, {"count": 0, "successes": 0, "scores": []})
        success = lookup(r["context"], "task.success")
        outcome = lookup(r["context"], "episode.outcome")
        if isinstance(success, bool):
            verdict: bool | None = success
        elif isinstance(outcome, (int, float)) and not isinstance(outcome, bool):
            verdict = outcome >= threshold
        else:
            verdict = None
        if verdict is not None:
            g["count"] += 1
            g["successes"] += int(verdict)
        if isinstance(outcome, (int, float)) and not isinstance(outcome, bool):
            g["scores"].append(outcome)
    return groups


def _key(group: dict[str, Any]) -> Any:
    if "bin" in group:
        return ("bin", tuple(group["bin"]))
    return ("value", _exact(group["value"]))


def _exact(value: Any) -> str:
    """A group value's identity: a number by its exact value (an integral float as that integer)."""
    if isinstance(value, float) and value.is_integer():
        return repr(int(value))
    return repr(value + 0.0 if isinstance(value, float) else value)


def check(result: dict[str, Any], expected: dict[Any, dict[str, Any]]) -> None:
    got = {_key(g): g for g in result["groups"] if g["memories"] or _key(g) in expected}
    assert set(got) == set(expected)
    for key, want in expected.items():
        g = got[key]
        assert (g["count"], g["successes"]) == (want["count"], want["successes"]), key
        if want["count"]:
            assert g["success_rate"] == pytest.approx(want["successes"] / want["count"])
        scores = want["scores"]
        assert g["scored"] == len(scores)
        assert g["mean_outcome"] == (pytest.approx(sum(scores) / len(scores)) if scores else None)


CASES: list[dict[str, Any]] = [
    {},
    {"context_filter": {"object.type": "heavy"}},
    {"context_filter": {"$or": [{"object.type": "slippery"}, {"task.success": True}]}},
    {"query": "pushed block"},
    {"query": "shoved", "context_filter": {"object.type": {"$ne": "default"}}},
    {"near": ([0.5, 0.5], 0.3, None)},
    {"near": ([0.2, 0.8], None, 25)},
    {"near": ([50.0, -3.0], None, 10_000)},  # more than there are: every memory with the point
    {"near": ([0.2, 0.8], 0.4, 10), "context_filter": {"object.type": "default"}},
    {"edges": [0.3, 0.75]},
    {"edges": [0.0, 0.5, 1.0], "threshold": 0.8},
]


def plans(mem: Memory) -> tuple[str, ...]:
    """SQLite's plans: "index" as used, "leaves" with every set counted from the leaf index
    (however small), "scan" the JSON-evaluating reference. PostgreSQL has one."""
    return PLANS if mem._db.kind == "sqlite" else ("index",)


def outcome_stats(mem: Memory, plan: str, monkeypatch: pytest.MonkeyPatch, group_by: str,
                  **kwargs: Any) -> dict[str, Any]:
    """Memory.outcome_stats by one of ``plans(mem)``."""
    monkeypatch.setattr(outcomes_sqlite, "SMALL_SET", 0 if plan == "leaves" else SMALL_SET)
    monkeypatch.setattr(outcomes_sqlite, "JSON_SHARE", 0.0 if plan == "leaves" else JSON_SHARE)
    if plan != "scan":
        return mem.outcome_stats(group_by, **kwargs)
    req = build_outcome_request(group_by=group_by, collection=mem.collection, **kwargs)
    with mem._db.read() as conn:
        return compute_outcome_stats(conn, req, plan="scan")


@pytest.mark.parametrize("case", CASES, ids=[json.dumps(c) for c in CASES])
def test_counts_match_a_plain_python_oracle(store: Any, case: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    spatial = k = None
    if "near" in case:
        target, radius, k = case["near"]
        spatial = {"field": "spatial.object_position", "target": target}
        if radius is not None:
            spatial["max_distance"] = radius
    expected = oracle(store, "params.push_factor", query=case.get("query", ""),
                      context_filter=case.get("context_filter"), near=case.get("near"), edges=case.get("edges"),
                      threshold=case.get("threshold", 0.5))
    assert sum(g["count"] for g in expected.values()) > 0, "the case must select something"
    with Memory(store, collection="push", embedder=None) as mem:
        for plan in plans(mem):
            result = outcome_stats(
                mem, plan, monkeypatch, "params.push_factor", query=case.get("query", ""),
                context_filter=case.get("context_filter"), spatial_sort=spatial, k=k, bins=case.get("edges"),
                success_threshold=case.get("threshold", 0.5))
            check(result, expected)
            assert result["matched"] == result["without_field"] + sum(g["memories"] for g in result["groups"])


def test_the_store_really_holds_merged_and_forgotten_experience(store: Any) -> None:
    rows = _rows(store)
    by_id = {r["id"]: r for r in rows}
    statuses = [r["status"] for r in rows]
    assert statuses.count("superseded") >= 10 and statuses.count("forgotten") == 8
    assert any(r["status"] == "superseded" and by_id[r["superseded_by"]]["status"] == "forgotten" for r in rows)


def test_merged_memories_still_count_as_experience(db_path: Any) -> None:
    with Memory(db_path, embedder=None) as mem:
        for trial in range(5):
            sid = mem.start_session()["session_id"]
            context = {"params": {"push_factor": 0.5}, "task": {"success": True}, "trial": trial}
            mem.learn("pushed with factor 0.5", context=context, session_id=sid)
            mem.end_session(sid, outcome_score=1.0)
        assert mem.stats()["collections"]["default"]["by_status"] == {"active": 1, "superseded": 4}
        stats = mem.outcome_stats("params.push_factor", query="factor")
    assert [(g["value"], g["count"], g["successes"]) for g in stats["groups"]] == [(0.5, 5, 5)]


def test_an_exact_repeat_is_one_memory_and_counts_once(mem: Memory) -> None:
    # Documented: learn() of the same text and context reinforces the stored memory instead of adding one.
    for _ in range(3):
        mem.learn("pushed with factor 0.5", context={"params": {"push_factor": 0.5}, "task": {"success": True}})
    assert [g["count"] for g in mem.outcome_stats("params.push_factor")["groups"]] == [1]


def test_equal_width_bins_cover_the_observed_range_and_list_empty_bins(db_path: Any) -> None:
    with Memory(db_path, embedder=None) as mem:
        for value, ok in [(0.0, True), (0.1, False), (1.0, True), (0.95, True)]:
            mem.learn(f"trial at {value}", context={"x": value, "task": {"success": ok}})
        stats = mem.outcome_stats("x", bins=4)
    assert [(g["bin"], g["count"], g["successes"]) for g in stats["groups"]] == [
        ([0.0, 0.25], 2, 1), ([0.25, 0.5], 0, 0), ([0.5, 0.75], 0, 0), ([0.75, 1.0], 2, 2)]
    assert stats["groups"][1]["success_rate"] is None and stats["groups"][1]["wilson_95"] is None


# Newcombe (1998), Statistics in Medicine 17:857-872, Table I, method 3 (Wilson score, no correction).
@pytest.mark.parametrize(("successes", "n", "low", "high"), [
    (81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718)])
def test_wilson_interval_matches_published_values(successes: int, n: int, low: float, high: float) -> None:
    interval = wilson_interval(successes, n)
    assert interval is not None
    assert interval[0] == pytest.approx(low, abs=5e-5) and interval[1] == pytest.approx(high, abs=5e-5)


@pytest.mark.parametrize(("successes", "n"), [(3, 7), (50, 50), (12, 400)])
def test_wilson_bounds_are_the_roots_of_the_score_equation(successes: int, n: int) -> None:
    # The Wilson bounds are the p where |p_hat - p| = z sqrt(p (1 - p) / n).
    interval = wilson_interval(successes, n)
    assert interval is not None
    p_hat = successes / n
    for p in interval:
        assert abs(p_hat - p) == pytest.approx(Z * math.sqrt(p * (1 - p) / n), abs=1e-12)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"group_by": 3}, "group_by"),
    ({"group_by": "a..b"}, "group_by"),
    ({"group_by": "x", "bins": 0}, "bins"),
    ({"group_by": "x", "bins": [1.0, 1.0]}, "bins"),
    ({"group_by": "x", "bins": [0, float("nan")]}, "bins[1]"),
    ({"group_by": "x", "bins": "5"}, "bins"),
    ({"group_by": "x", "k": 5}, "k"),
    ({"group_by": "x", "spatial_sort": {"field": "p", "target": [0, 0]}}, "spatial_sort.max_distance"),
    ({"group_by": "x", "spatial_sort": {"field": "p", "target": [0, 0]}, "k": 0}, "k"),
    ({"group_by": "x", "success_threshold": 1.5}, "success_threshold"),
    ({"group_by": "x", "context_filter": {"a": {"$bogus": 1}}}, "context_filter.a"),
    ({"group_by": "x", "query": "!!!"}, "query"),
    ({"group_by": "x", "since": 5, "until": 1}, "since"),
    ({"group_by": "x", "collection": "bad name"}, "collection"),
])
def test_bad_input_names_the_field(mem: Memory, kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        mem.outcome_stats(**kwargs)
    assert err.value.field == field


# -- the index plan against the scan plan on random stores and filters --------------------

_examples = iter(range(1_000_000))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    contexts=st.lists(st.tuples(_random_context(), st.one_of(st.none(), st.floats(0, 1), st.just("high"))),
                      min_size=1, max_size=10),
    spec=st.one_of(st.none(), filters),
    group_by=st.sampled_from(["params.force", "params", "task.success", "note", "robot.id"]),
    forget=st.lists(st.integers(0, 9), max_size=2),
)
def test_the_index_plan_counts_what_the_scan_plan_counts(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, contexts: list[Any],
    spec: dict[str, Any] | None, group_by: str, forget: list[int],
) -> None:
    monkeypatch.setattr(outcomes_sqlite, "SMALL_SET", 0)
    monkeypatch.setattr(outcomes_sqlite, "JSON_SHARE", 0.0)
    collection = f"c{next(_examples)}"
    with Memory(_property_store(tmp_path_factory), embedder=None) as mem:
        batch = []
        for i, (ctx, outcome) in enumerate(contexts):
            if outcome is not None:
                ctx = {**ctx, "episode": {"outcome": outcome}}
            batch.append({"description": f"trial {i} of {collection}", "metadata": ctx, "embed": False,
                          "collection": collection})
        ids = mem.save_perceptions(batch)
        for i in forget:
            if i < len(ids):
                mem.forget(ids[i], "test")
        req = build_outcome_request(group_by=group_by, collection=collection, context_filter=spec)
        with mem._db.read() as conn:
            index, scan = (compute_outcome_stats(conn, req, plan=plan) for plan in ("index", "scan"))
            cached = compute_outcome_stats(conn, req, columns=_COLUMNS)
    assert _comparable(index) == _comparable(scan), (contexts, spec)
    assert _comparable(cached) == _comparable(scan), (contexts, spec)


_STORE: list[Path] = []
#: One cache for every example, as one process would hold it: columns of earlier collections
#: are evicted, and those of the group paths it meets again are caught up, not reloaded.
_COLUMNS = LeafColumns(max_columns=4)


def _property_store(factory: pytest.TempPathFactory) -> Path:
    """One file for every example (each in its own collection): opening a store costs more than an example."""
    if not _STORE:
        _STORE.append(factory.mktemp("property") / "memory.db")
    return _STORE[0]


def _comparable(result: dict[str, Any]) -> dict[str, Any]:
    def identity(value: Any) -> str:  # 5, 5.0 and -0.0, 0 are one value
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return _exact(value) if number else json.dumps(value, sort_keys=True)

    groups = sorted((identity(g.get("bin", g.get("value"))), g["memories"], g["count"],
                     g["successes"], g["scored"], None if g["mean_outcome"] is None else round(g["mean_outcome"], 9))
                    for g in result["groups"])
    return {**result, "groups": groups}


def test_numeral_texts_stay_texts(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    # The leaf index stores a text that reads as a number as that number; the answer must not.
    for i, value in enumerate(["05", "5", 5, 5.0, "5.0", "4x", 7]):
        mem.learn(f"trial {i}", context={"f": value, "task": {"success": i % 2 == 0}})
    for plan in plans(mem):
        stats = outcome_stats(mem, plan, monkeypatch, "f")
        assert [(g["value"], g["memories"]) for g in stats["groups"]] == [
            (5, 2), (7, 1), ("05", 1), ("4x", 1), ("5", 1), ("5.0", 1)], plan
        for spec, matched in [({"f": "5"}, 1), ({"f": {"$in": ["05", 7]}}, 2), ({"f": {"$gt": "4"}}, 3),
                              ({"f": {"$gte": 5}}, 3)]:
            assert outcome_stats(mem, plan, monkeypatch, "f", context_filter=spec)["matched"] == matched, (plan, spec)


def test_a_dot_path_never_steps_into_an_array(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    mem.learn("an array", context={"a": [10, 20], "task": {"success": True}})
    mem.learn("an object", context={"a": {"0": 5}, "task": {"success": False}})
    for plan in plans(mem):
        stats = outcome_stats(mem, plan, monkeypatch, "a.0")
        assert (stats["without_field"], [(g["value"], g["successes"]) for g in stats["groups"]]) == (1, [(5, 0)]), plan


def test_a_neighbourhood_in_a_frame_leaves_out_other_frames(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    # As recall: a point in another frame has no distance to the target; one naming no frame is compared.
    for i, frame in enumerate(["world", "table", None, "world", "table"]):
        spatial: dict[str, Any] = {"position": [0.1 * i, 0.0]}
        if frame is not None:
            spatial["frame"] = frame
        mem.learn(f"push {i}", context={"f": i, "spatial": spatial, "task": {"success": True}})
    for plan in plans(mem):
        for extra, expected in [({"max_distance": 1.0}, [0, 2, 3]), ({}, [0, 2])]:
            near = {"field": "spatial.position", "target": [0.0, 0.0], "frame": "world", **extra}
            stats = outcome_stats(mem, plan, monkeypatch, "f", spatial_sort=near, k=None if extra else 2)
            assert [g["value"] for g in stats["groups"]] == expected, (plan, extra)


def test_a_frame_stored_as_no_string_is_another_frame(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    # SQLite compared an array's JSON text with the asked frame: '["map"]' matched ["map"]
    for i, frame in enumerate([["map"], {"a": 1}, '["map"]', '{"a":1}']):
        mem.learn(f"push {i}", context={"f": i, "spatial": {"position": [0.1 * i, 0.0], "frame": frame},
                                        "task": {"success": True}})
    for plan in plans(mem):
        for asked, expected in [('["map"]', [2]), ('{"a":1}', [3])]:
            near = {"field": "spatial.position", "target": [0.0, 0.0], "frame": asked, "max_distance": 1.0}
            stats = outcome_stats(mem, plan, monkeypatch, "f", spatial_sort=near)
            assert [g["value"] for g in stats["groups"]] == expected, (plan, asked)


# -- the cached leaf columns follow writes made elsewhere -------------------------------


def _by_plan(mem: Memory, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(mem.outcome_stats, counted from mem's cached columns; the leaf index without a cache; the JSON scan)."""
    cached = mem.outcome_stats("params.f", **kwargs)
    req = build_outcome_request(group_by="params.f", collection=mem.collection, **kwargs)
    with mem._db.read() as conn:
        index, scan = (compute_outcome_stats(conn, req, plan=plan) for plan in ("index", "scan"))
    return cached, index, scan


def _writer_process(path: Path, steps: str) -> None:
    """Writes from another process, with its own Memory."""
    code = (
        "import sys, json\n"
        "from robotmem import Memory\n"
        "with Memory(sys.argv[1], embedder=None) as mem:\n"
        "    for op, arg in json.loads(sys.argv[2]):\n"
        "        if op == 'learn':\n"
        "            mem.learn(arg['text'], context=arg['context'])\n"
        "        elif op == 'forget':\n"
        "            mem.forget(arg, 'test')\n"
        "        elif op == 'update':\n"
        "            mem.update(arg['id'], 'trial changed', context=arg['context'])\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path), steps], check=True, env=os.environ.copy())


def test_cached_columns_see_writes_of_another_memory_and_another_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "memory.db"
    loads: list[str] = []
    load = LeafColumn._load
    monkeypatch.setattr(LeafColumn, "_load", lambda self, *a: (loads.append(self.path), load(self, *a))[1])
    with Memory(path, embedder=None) as reader, Memory(path, embedder=None) as writer:
        ids = [reader.learn(f"trial {i}", context={"params": {"f": i % 3}, "task": {"success": i % 2 == 0}})
               ["memory_id"] for i in range(30)]
        first = _by_plan(reader, query="trial")
        assert first[0] == first[2] and first[0]["matched"] == 30
        assert sorted(loads) == ["$.episode.outcome", "$.params.f", "$.task.success"]

        # Another Memory on the file: a new memory, a forgotten one, a changed context, an episode's outcome.
        sid = writer.start_session()["session_id"]
        writer.learn("trial new", context={"params": {"f": 7}}, session_id=sid)
        writer.forget(ids[0], "test")
        writer.update(ids[1], "trial changed", context={"params": {"f": 9}, "task": {"success": False}})
        during = _by_plan(reader, query="trial")
        assert during[0] == during[1] == during[2]
        values = {g["value"]: (g["memories"], g["successes"], g["scored"]) for g in during[0]["groups"]}
        assert values[7] == (1, 0, 0) and values[9] == (1, 0, 0) and during[0]["matched"] == 30
        # end_session writes episode.outcome into the contexts of the episode, nothing else of theirs.
        writer.end_session(sid, outcome_score=0.9)
        after = _by_plan(reader, query="trial")
        assert after[0] == after[1] == after[2]
        assert [(g["successes"], g["mean_outcome"]) for g in after[0]["groups"] if g["value"] == 7] == [(1, 0.9)]

        # Another process: the same, through a Memory of its own.
        steps = [["learn", {"text": "trial far", "context": {"params": {"f": 11}, "task": {"success": True}}}],
                 ["forget", ids[2]], ["update", {"id": ids[3], "context": {"params": {"f": 7}}}],
                 ["update", {"id": ids[4], "context": {"other": 1}}]]
        _writer_process(path, json.dumps(steps))
        last = _by_plan(reader, query="trial")
        assert last[0] == last[1] == last[2]
        values = {g["value"]: g["memories"] for g in last[0]["groups"]}
        assert values[11] == 1 and values[7] == 2 and last[0]["without_field"] == 1
        assert last[0]["matched"] == after[0]["matched"]  # one new, one forgotten
        assert len(loads) == 3, "caught up from change_log, never reloaded"


def test_cached_columns_see_a_deleted_row_and_one_inserted_below_the_newest_id(tmp_path: Path) -> None:
    # Raw repairs and imports that keep ids: the triggers log them, so no reload is needed to see them.
    path = tmp_path / "memory.db"
    with Memory(path, embedder=None) as reader, Memory(path, embedder=None) as writer:
        ids = [reader.learn(f"trial {i}", context={"params": {"f": i}, "task": {"success": True}})["memory_id"]
               for i in range(4)]
        assert reader.outcome_stats("params.f")["matched"] == 4
        with writer._db.read() as conn:
            row = writer._db.iter_rows(conn, ids[0], 1)[0]
        with writer._db.write() as conn:
            conn.execute("DELETE FROM memories WHERE id = ?", (ids[1],))
        assert [g["value"] for g in reader.outcome_stats("params.f")["groups"]] == [0, 2, 3]
        with writer._db.write() as conn:
            writer._db.insert_row(conn, {**row, "context": {"params": {"f": 5, "g": 1}, "task": {"success": False},
                                                            "episode": {"outcome": 0.25}}}, keep_id=True)
        stats = reader.outcome_stats("params.f")
        assert [(g["value"], g["successes"]) for g in stats["groups"]] == [(0, 1), (2, 1), (3, 1), (5, 0)]
        # A column loaded now holds the row; the verdict columns, loaded before, must have caught up with it.
        stats = reader.outcome_stats("params.g")
        assert [(g["value"], g["count"], g["successes"], g["mean_outcome"])
                for g in stats["groups"]] == [(1, 1, 0, 0.25)]


def test_groups_are_by_exact_value_beyond_2_to_53(mem: Memory) -> None:
    """float() merged 2**53 and 2**53 + 1 into one group, while a filter tells them apart."""
    for trial, ok in [(2**53, True), (2**53 + 1, False), (2**53 + 1, True), (1, True), (1.0, False),
                      (-(2**63), True), (2**63 - 1, False), (9007199254740992.0, False)]:
        mem.learn(f"trial {trial!r} {ok}", {"trial": {"id": trial}, "task": {"success": ok}})
    result = mem.outcome_stats("trial.id")
    got = [(g["value"], g["memories"], g["successes"]) for g in result["groups"]]
    # 2.0**53 is equal to the integer 2**53 as a number: one group with it.
    assert got == [(-(2**63), 1, 1), (1, 2, 1), (2**53, 2, 1), (2**53 + 1, 2, 1), (2**63 - 1, 1, 0)]
    for trial, count in [(2**53, 2), (2**53 + 1, 2)]:
        found = mem.recall("", context_filter={"trial.id": trial}, n=10, min_relevance=0)["results"]
        assert len(found) == count


@pytest.mark.parametrize(("outcomes", "mean"), [
    ([1e308, 1e308], 1e308), ([-1e308, -1e308], -1e308), ([1.7976931348623157e308] * 3, 1.7976931348623157e308),
    ([1e308, -1e308, 3.0, 5e307], 1.25e307 + 0.75), ([2**63 - 1, 2**63 - 1, -(2**63)], (2**63 - 2) / 3),
    ([0.25, 0.5, 1e-310], (0.75 + 1e-310) / 3)])
def test_mean_outcome_of_scores_near_the_float_limits_does_not_overflow(
    mem: Memory, monkeypatch: pytest.MonkeyPatch, outcomes: list[float], mean: float,
) -> None:
    """The sum of two outcomes of 1e308 overflowed: SQLite answered inf, PostgreSQL failed."""
    for i, outcome in enumerate(outcomes):
        mem.learn(f"scored case {i}", context={"g": "same", "episode": {"outcome": outcome}})
    mem.learn("a case in an object group", context={"g": {"k": 1}, "episode": {"outcome": outcomes[0]}})
    for plan in plans(mem):
        groups = outcome_stats(mem, plan, monkeypatch, "g")["groups"]
        assert [(g["value"], g["scored"]) for g in groups] == [("same", len(outcomes)), ({"k": 1}, 1)], plan
        assert groups[0]["mean_outcome"] == pytest.approx(mean, rel=1e-12), plan
        assert groups[1]["mean_outcome"] == float(outcomes[0]), plan
        binned = outcome_stats(mem, plan, monkeypatch, "g", bins=[0.0, 1.0])["groups"]
        assert [g["mean_outcome"] for g in binned if "value" in g] == pytest.approx([mean, outcomes[0]], rel=1e-12)


def test_equal_width_bins_over_the_whole_float_range(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The width 1e308 - -1e308 overflowed: edges [nan, inf], every value in the first bin."""
    for i, value in enumerate([-1e308, -5.0, 0.0, 5.0, 1e308]):
        mem.learn(f"push factor case {i}", context={"params": {"f": value}, "task": {"success": i % 2 == 0}})
    for plan in plans(mem):
        four = outcome_stats(mem, plan, monkeypatch, "params.f", bins=4)["groups"]
        assert [(g["bin"], g["memories"]) for g in four] == [
            ([-1e308, -5e307], 1), ([-5e307, 0.0], 1), ([0.0, 5e307], 2), ([5e307, 1e308], 1)], plan
        three = outcome_stats(mem, plan, monkeypatch, "params.f", bins=3)["groups"]
        edges = [g["bin"][0] for g in three] + [three[-1]["bin"][1]]
        assert all(math.isfinite(e) for e in edges) and edges[0] == -1e308 and edges[-1] == 1e308, plan
        assert edges == sorted(edges) and [g["memories"] for g in three] == [1, 3, 1], plan


def test_a_group_of_an_integer_and_an_equal_float_shows_the_integer(
    mem: Memory, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PostgreSQL showed 1.0 where SQLite showed 1: jsonb groups them and gave back either."""
    for i, value in enumerate([1.0, 1, float(2**53), 2**53, 2.5, -3.0, -3, 7]):
        mem.learn(f"grouping case {i}", context={"g": value, "task": {"success": True}})
    for plan in plans(mem):
        got = [(g["value"], type(g["value"]), g["memories"]) for g in outcome_stats(mem, plan, monkeypatch, "g")["groups"]]
        assert got == [(-3, int, 2), (1, int, 2), (2.5, float, 1), (7, int, 1), (2**53, int, 2)], plan
