"""A selective filter's exact result (read through the leaf index) drives every side of recall.

Each answer is compared with the same recall when the leaf index is not used
(``LEAF_CANDIDATE_CAP = 0`` makes every filter "broad": full SQL evaluation), so the
indexed paths are checked against the plain one over the same store and request.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest
from given_vectors import GivenVectors

from robotmem import Memory
from robotmem.search import spatial, vectors
from robotmem.search.request import build_request

WORDS = ["grip", "slip", "cube", "bottle", "shelf", "drawer", "valve", "cable", "door", "wet"]


@pytest.fixture
def store(tmp_path: Path, clock: Any) -> Iterator[tuple[Memory, GivenVectors]]:
    rng = random.Random(7)
    embedder = GivenVectors()
    with Memory(tmp_path / "sel.db", clock=clock, embedder=embedder) as mem:
        records = []
        for i in range(1200):
            words = " ".join(rng.choice(WORDS) for _ in range(4))
            frame = ["map", "odom", None][i % 3]
            position: dict[str, Any] = {"p": [round(rng.uniform(-10, 10), 2) for _ in range(3)]}
            if frame is not None:
                position["frame"] = frame
            records.append({"description": f"c{i % 20} episode {i}: {words} grip", "metadata": {
                "task": {"batch": i % 40, "success": i % 3 != 1, "name": ["pick", "place"][i % 2]},
                "spatial": position}})
        mem.save_perceptions(records)
        yield mem, embedder


def _answer(mem: Memory, **kwargs: Any) -> list[tuple[Any, ...]]:
    result = mem.recall(**kwargs)["results"]
    return [(h["id"], h.get("distance"), h.get("similarity"), h["relevance"]) for h in result]


CASES = [
    {"query": "grip cube", "context_filter": {"task.batch": 7, "task.success": True}},
    {"query": "c3 wet valve", "context_filter": {"task.batch": {"$in": [3, 4]}}, "min_relevance": 0},
    {"query": "", "context_filter": {"task.batch": 5},
     "spatial_sort": {"field": "spatial.p", "target": [1.0, 2.0, 0.5]}},
    {"query": "shelf", "context_filter": {"task.batch": {"$in": [1, 2, 9]}, "task.name": "pick"},
     "spatial_sort": {"field": "spatial.p", "target": [0, 0, 0], "frame": "map"}},
    {"query": "door", "context_filter": {"task.batch": 11},
     "spatial_sort": {"field": "spatial.p", "target": [-3, 4, 0], "max_distance": 9.0}},
    # Wider than DIRECT_LIMIT below: the tree walk with membership in the filter result.
    {"query": "bottle", "context_filter": {"task.batch": {"$gte": 4}, "task.success": True},
     "spatial_sort": {"field": "spatial.p", "target": [2, 2, 2], "frame": "odom"}},
]


@pytest.mark.parametrize("case", CASES)
def test_indexed_paths_answer_as_the_full_scan_does(store: tuple[Memory, GivenVectors], case: dict[str, Any],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    mem, _ = store
    monkeypatch.setattr(spatial, "DIRECT_LIMIT", 64)
    monkeypatch.setattr(vectors, "SELECTIVE_SHARE", 1.0)  # every case through the leaf index first
    indexed = _answer(mem, n=15, **case)
    monkeypatch.setattr(vectors, "LEAF_CANDIDATE_CAP", 0)
    assert indexed == _answer(mem, n=15, **case)
    assert indexed, "the case must return something to compare"


def test_a_filter_that_passes_much_of_a_small_store_is_checked_on_the_best_rows(
        store: tuple[Memory, GivenVectors]) -> None:
    """Under LEAF_CANDIDATE_CAP, but most of the collection: its rows are not read through the leaf
    index (at 10,000 memories a 90 % filter read that way cost 57 ms a recall, against 6 ms)."""
    mem, _ = store

    def source(context_filter: dict[str, Any]) -> Any:
        req = build_request(query="grip", collection="default", n=5, min_confidence=0.1, session_id=None,
                            context_filter=context_filter, spatial_sort=None, since=None, until=None)
        with mem._db.read() as conn:
            return vectors.filter_source(conn, req)

    assert source({"task.success": True}) is None  # 800 of 1,200
    assert source({"task.batch": {"$gte": 4}}) is None  # 1,080 of 1,200
    assert source({"task.batch": 7}) is not None  # 30 of 1,200
    assert source({"task.batch": {"$in": [1, 2, 3]}}) is not None  # 90 of 1,200, under a tenth


def test_sqlite_requests_carry_the_leaf_index_candidates() -> None:
    req = build_request(query="x", collection="c", n=5, min_confidence=0.1, session_id=None,
                        context_filter={"robot.id": "arm-2", "task.success": True}, spatial_sort=None,
                        since=None, until=None)
    assert req.filter is not None and len(req.filter.candidates) == 2
    pg = build_request(query="x", collection="c", n=5, min_confidence=0.1, session_id=None,
                       context_filter={"robot.id": "arm-2"}, spatial_sort=None, since=None, until=None,
                       dialect="postgresql")
    assert pg.filter is not None and pg.filter.candidates == ()


def test_a_selective_filter_never_evaluates_the_filter_over_every_match(
        store: tuple[Memory, GivenVectors], monkeypatch: pytest.MonkeyPatch) -> None:
    """Full text, vectors and space read the leaf index; no statement joins every full-text match."""
    mem, _ = store
    statements: list[str] = []

    def hook(conn: apsw.Connection) -> None:
        conn.exec_trace = lambda _cursor, sql, _bindings: statements.append(sql) or True

    monkeypatch.setattr(apsw, "connection_hooks", [*apsw.connection_hooks, hook])
    with Memory(mem.path, embedder=GivenVectors()) as other:
        other.recall("grip cube", context_filter={"task.batch": 7, "task.success": True},
                     spatial_sort={"field": "spatial.p", "target": [0, 0, 0]})
    assert any("context_leaves" in s for s in statements)
    assert not any("memories_fts" in s and "JOIN memories" in s for s in statements)
    assert not any("spatial_points r JOIN memories" in s for s in statements)


def test_a_broad_filter_checks_only_the_nearest_points(store: tuple[Memory, GivenVectors]) -> None:
    """The tree walk asks eligibility of the nearest points first, not of the whole box."""
    mem, _ = store
    checked: list[int] = []
    spec = {"field": "spatial.p", "target": [0.0, 0.0, 0.0]}
    req = build_request(query="", collection=mem.collection, n=5, min_confidence=0.0, session_id=None,
                        context_filter={"task.success": True}, spatial_sort=spec, since=None, until=None)
    conn = apsw.Connection(str(mem.path))
    members = set(np.arange(1, 1201).tolist())

    def accept(ids: list[int]) -> set[int]:
        checked.extend(ids)
        return {m for m in ids if m in members and m % 3 != 2}

    assert req.spatial is not None
    found = spatial.walk_trees(conn, req.spatial, 10, accept)
    assert len(found) >= 10 and all(m % 3 != 2 for m, _ in found)
    assert len(checked) < 200  # of 1,200 points; all points would be read by the last, widest box
