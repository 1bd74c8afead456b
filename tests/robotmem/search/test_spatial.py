import math
import random
from pathlib import Path
from typing import Any

import apsw
import pytest

from robotmem import Memory
from robotmem.store.points import extract_points


def test_points_are_found_at_any_depth_as_lists_or_xyz_objects():
    context = {
        "spatial": {"object_position": [1, 2, 3], "start": {"x": 0.5, "y": -1}, "bbox": [[0, 0], [1, 1]]},
        "task": {"goal": [4, 5]},
        "note": [1, "a"],
    }
    assert dict(extract_points(context)) == {
        "spatial.object_position": (1.0, 2.0, 3.0),
        "spatial.start": (0.5, -1.0, 0.0),
        "task.goal": (4.0, 5.0, 0.0),
    }


def test_a_point_inside_a_point_object_is_a_point_too():
    # only a dict not itself taken as a point was looked into: spatial.pose.goal was never indexed
    context = {"spatial": {"pose": {"x": 5, "y": 5, "goal": [0, 0], "via": {"a": {"x": 1, "y": 2, "z": 3}}}}}
    assert extract_points(context) == [("spatial.pose", (5.0, 5.0, 0.0)), ("spatial.pose.goal", (0.0, 0.0, 0.0)),
                                       ("spatial.pose.via.a", (1.0, 2.0, 3.0))]


@pytest.mark.parametrize("dims", [2, 3])
def test_nearest_first_matches_brute_force_with_a_filter(mem: Memory, dims: int):
    rng = random.Random(dims)
    points = {}
    records = []
    for i in range(1500):
        p = [round(rng.uniform(-50, 50), 3) for _ in range(dims)]
        records.append({"description": f"sample point number {i}", "metadata": {
            "spatial": {"p": p}, "task": {"ok": i % 9 == 0}}})
    ids = mem.save_perceptions(records)
    for memory_id, record in zip(ids, records):
        if record["metadata"]["task"]["ok"]:
            points[memory_id] = record["metadata"]["spatial"]["p"]
    target = [3.0, -7.0, 1.0][:dims]
    expected = sorted(points, key=lambda m: (math.dist(points[m], target), -m))[:10]
    result = mem.recall("", n=10, context_filter={"task.ok": True},
                        spatial_sort={"field": "spatial.p", "target": target})
    assert [h["id"] for h in result["results"]] == expected
    for hit in result["results"]:
        assert hit["distance"] == pytest.approx(math.dist(points[hit["id"]], target))


def test_a_lone_far_match_is_still_found(mem: Memory):
    mem.save_perceptions([{"description": f"near clutter {i}", "metadata": {"spatial": {"p": [i * 0.01, 0]}}}
                          for i in range(500)])
    far = mem.learn("the only success", {"spatial": {"p": [9000, 9000]}, "task": {"success": True}})["memory_id"]
    result = mem.recall("", context_filter={"task.success": True}, spatial_sort={"field": "spatial.p", "target": [0, 0]})
    assert [h["id"] for h in result["results"]] == [far]


def test_update_moves_a_memory_in_the_spatial_index(mem: Memory):
    mid = mem.learn("moving marker", {"spatial": {"p": [100, 100]}})["memory_id"]
    mem.learn("fixed marker", {"spatial": {"p": [5, 5]}})
    mem.update(mid, "moving marker", {"spatial": {"p": [0, 0]}})
    result = mem.recall("", spatial_sort={"field": "spatial.p", "target": [0, 0]}, n=1)
    assert result["results"][0]["id"] == mid and result["results"][0]["distance"] == 0


def _scattered_lab(memory: Memory) -> list[int]:
    """90 memories of eight kinds, scattered in space (more than recall's candidate pool of 50)."""
    rng = random.Random(7)
    kinds = ["gripper slipped on the wet glass", "wheel odometry drifted on the carpet",
             "camera exposure saturated near the window", "conveyor belt jammed with a carton",
             "battery voltage sagged during the climb", "lidar returned ghost points off the mirror",
             "elbow joint overheated after long holds", "dock alignment failed in low light"]
    return memory.save_perceptions([
        {"description": f"{kinds[i % 8]} during run {i}",
         "metadata": {"spatial": {"p": [round(rng.uniform(-20, 20), 3), round(rng.uniform(-20, 20), 3)]}}}
        for i in range(90)])


def _relevance_as_in_a_plain_recall(memory: Memory, with_vectors: bool) -> None:
    """With a spatial sort only the nearest memories' match is computed; each still gets the
    relevance (and similarity) that a recall without the sort gives it, also when it is not
    among the query's best matches."""
    _scattered_lab(memory)
    query = "gripper slip on glass"
    near = memory.recall(query, n=10, spatial_sort={"field": "spatial.p", "target": [0.0, 0.0]})["results"]
    plain = {h["id"]: h for h in memory.recall(query, n=90, min_relevance=0)["results"]}
    assert len(near) == 10 and [h["distance"] for h in near] == sorted(h["distance"] for h in near)
    related = [h for h in near if "gripper" in h["content"]]
    unrelated = [h for h in near if h not in related]
    assert related and unrelated
    # A plain recall's candidates: memories sharing a word with the query, or (with vectors) at
    # least recall's minimum similarity to it. Those it returns are compared, answers or not.
    compared = [h for h in near if h["id"] in plain]
    assert [h["id"] for h in related] == [h["id"] for h in compared if h in related]
    for hit in compared:
        assert hit["relevance"] == pytest.approx(plain[hit["id"]]["relevance"], abs=1e-4)
    if with_vectors:  # every hit's similarity is its cosine with the query, candidate or not
        assert memory.embedder is not None
        vectors = memory.embedder.embed([query] + [h["content"] for h in near])
        for hit, vector in zip(near, vectors[1:]):
            assert hit["similarity"] == pytest.approx(float(vector @ vectors[0]), abs=1e-3)
    assert max(h["relevance"] for h in unrelated) < min(h["relevance"] for h in related)


def test_spatial_hits_carry_the_relevance_a_plain_recall_gives_them(mem: Memory):
    _relevance_as_in_a_plain_recall(mem, with_vectors=False)


def test_spatial_hits_carry_the_relevance_and_similarity_a_plain_recall_gives_them(hybrid_mem: Memory):
    _relevance_as_in_a_plain_recall(hybrid_mem, with_vectors=True)


def _brute_nearest(points: dict[int, list[float]], target: list[float], n: int) -> list[int]:
    return sorted(points, key=lambda m: (math.dist(points[m][: len(target)], target), -m))[:n]


def test_points_of_other_fields_nearer_to_the_target_do_not_take_the_answer(mem: Memory):
    """The tree holds every field's points; the walk reads a row's field only when its box could
    place it in the answer, so the nearer points of another field must be read and left out."""
    rng = random.Random(11)
    records, wanted = [], {}
    for i in range(900):
        own = [round(rng.uniform(-5, 5), 4) for _ in range(3)]
        other = [round(rng.uniform(-0.5, 0.5), 4) for _ in range(3)]  # nearer to the target, all of them
        records.append({"description": f"two points {i}", "metadata": {
            "spatial": {"p": own, "q": other}, "task": {"ok": i % 4 != 0}}})
    for memory_id, record in zip(mem.save_perceptions(records), records):
        if record["metadata"]["task"]["ok"]:
            wanted[memory_id] = record["metadata"]["spatial"]["p"]
    target = [0.1, -0.2, 0.05]
    found = mem.recall("", n=12, context_filter={"task.ok": True},
                       spatial_sort={"field": "spatial.p", "target": target})["results"]
    assert [h["id"] for h in found] == _brute_nearest(wanted, target, 12)
    for hit in found:
        assert hit["distance"] == pytest.approx(math.dist(wanted[hit["id"]], target), abs=1e-12)


def test_points_the_tree_cannot_tell_apart_come_in_exact_order(mem: Memory):
    """R*Tree keeps 32-bit boxes: points 1e-9 apart share one box, and only their exact
    coordinates (read beside the tree) order them."""
    xs = [1.0 + k * 1e-9 for k in (7, 3, 9, 1, 5, 0, 8, 2, 6, 4)]
    ids = mem.save_perceptions([{"description": f"close {k}", "metadata": {"spatial": {"p": [x, 1.0, 0.0]}}}
                                for k, x in enumerate(xs)])
    points = {m: [x, 1.0, 0.0] for m, x in zip(ids, xs)}
    found = mem.recall("", n=10, spatial_sort={"field": "spatial.p", "target": [1.0, 1.0, 0.0]})["results"]
    assert [h["id"] for h in found] == _brute_nearest(points, [1.0, 1.0, 0.0], 10)
    assert [h["distance"] for h in found] == sorted(h["distance"] for h in found)
    within = mem.recall("", n=10, spatial_sort={"field": "spatial.p", "target": [1.0, 1.0, 0.0],
                                                "max_distance": 4.5e-9})["results"]
    assert [h["id"] for h in within] == _brute_nearest({m: p for m, p in points.items() if p[0] <= 1.0 + 4.5e-9},
                                                       [1.0, 1.0, 0.0], 10)


def test_max_distance_returns_exactly_the_points_within_it(mem: Memory):
    rng = random.Random(5)
    records = [{"description": f"scatter {i}", "metadata": {"spatial": {"p": [rng.uniform(-3, 3), rng.uniform(-3, 3)],
                                                                        "q": [rng.uniform(-1, 1), rng.uniform(-1, 1)]}}}
               for i in range(600)]
    ids = mem.save_perceptions(records)
    points = {m: r["metadata"]["spatial"]["p"] for m, r in zip(ids, records)}
    target = [0.3, 0.4]
    found = mem.recall("", n=100, spatial_sort={"field": "spatial.p", "target": target, "max_distance": 0.7})["results"]
    inside = [m for m in _brute_nearest(points, target, 600) if math.dist(points[m], target) <= 0.7]
    assert [h["id"] for h in found] == inside[:100] and len(inside) > 10


@pytest.mark.sqlite_only
def test_the_walk_reads_exact_points_only_near_the_answer(mem: Memory, monkeypatch: pytest.MonkeyPatch):
    """Field and exact coordinates (one row lookup each beside the tree) are read for the points
    nearest by their boxes, not for every point of the box."""
    from robotmem.search import spatial
    from robotmem.store import points as points_module

    rng = random.Random(3)
    cloud = [[rng.uniform(-0.5, 0.5) for _ in range(3)] for _ in range(3000)]
    ids = mem.save_perceptions([{"description": f"dense {i}", "metadata": {"spatial": {"p": p}}}
                                for i, p in enumerate(cloud)])
    read: list[int] = []
    real = points_module.exact_points

    def counting(conn: object, tree_ids: list[int]) -> list[tuple[int, int, str, float, float, float]]:
        read.extend(tree_ids)
        return real(conn, tree_ids)  # type: ignore[arg-type]

    monkeypatch.setattr(spatial, "exact_points", counting)
    found = mem.recall("", n=10, spatial_sort={"field": "spatial.p", "target": [0.0, 0.0, 0.0]})["results"]
    assert [h["id"] for h in found] == _brute_nearest(dict(zip(ids, cloud)), [0.0, 0.0, 0.0], 10)
    first_box = sum(1 for p in cloud if max(map(abs, p)) <= 0.25)  # the walk's first box: about 375 points
    assert first_box > 300 and 10 <= len(read) <= 100


def test_numbers_beyond_the_coordinate_bound_make_no_point():
    from robotmem.store.points import MAX_COORDINATE

    context = {"range": [-1e300, 1e300], "edge": [MAX_COORDINATE, -MAX_COORDINATE], "over": [1e15 * 1.0000001, 0],
               "big_int": [10**20, 0], "xyz": {"x": 1, "y": 2, "z": 1e16}, "xy": {"x": 1e16, "y": 0},
               "named_z": {"x": 1, "y": 2, "z": "up"}}
    assert dict(extract_points(context)) == {"edge": (1e15, -1e15, 0.0), "named_z": (1.0, 2.0, 0.0)}


def test_a_huge_number_pair_is_kept_but_does_not_break_later_writes(mem: Memory):
    """On PostgreSQL a point near 1e154 or beyond overflowed the GiST index once it held more than a
    page, and every later write into that page failed: such a pair is no point now, on both stores."""
    odd = mem.learn("a calibration range note", context={"range": [-1e300, 1e300], "spatial": {"pos": [1e200, 0]},
                                                          "tag": "odd"})["memory_id"]
    ids = [mem.learn(f"placed the cube at spot {i}", context={"spatial": {"pos": [i % 7, i % 5]}, "tag": i % 200})[
        "memory_id"] for i in range(400)]
    assert len(ids) == 400
    assert mem.get(odd)["context"]["range"] == [-1e300, 1e300]
    hits = mem.recall("", min_relevance=0, context_filter={"tag": {"$in": ["odd", 0]}},
                      spatial_sort={"field": "spatial.pos", "target": [0, 0]})["results"]
    # The odd memory has no point: it sorts after the compared ones, without a distance.
    assert [(h["id"], h.get("distance")) for h in hits] == [(ids[0], 0.0), (ids[200], 4.0), (odd, None)]
    stats = mem.outcome_stats("tag", spatial_sort={"field": "spatial.pos", "target": [0, 0], "max_distance": 4e15})
    assert stats["matched"] == 400


def test_a_point_at_the_bound_is_found_at_its_distance(mem: Memory):
    far = mem.learn("far edge marker", context={"spatial": {"pos": [1e15, -1e15]}})["memory_id"]
    near = mem.learn("near marker", context={"spatial": {"pos": [1, 1]}})["memory_id"]
    hits = mem.recall("", spatial_sort={"field": "spatial.pos", "target": [-1e15, 1e15], "max_distance": 3e15},
                      min_relevance=0)["results"]
    assert [h["id"] for h in hits] == [near, far]
    assert hits[1]["distance"] == pytest.approx(math.hypot(2e15, 2e15))


@pytest.mark.parametrize("spatial_sort, field", [
    ({"field": "spatial.pos", "target": [1e16, 0]}, "spatial_sort.target"),
    ({"field": "spatial.pos", "target": [0, 0, -1e300]}, "spatial_sort.target"),
    ({"field": "spatial.pos", "target": [0, 0], "max_distance": 1e300}, "spatial_sort.max_distance"),
    ({"field": "spatial.pos", "target": [0, 0], "max_distance": 4.1e15}, "spatial_sort.max_distance"),
])
def test_a_target_or_max_distance_beyond_the_bound_is_refused(mem: Memory, spatial_sort: dict, field: str):
    from robotmem.errors import ValidationError

    with pytest.raises(ValidationError) as err:
        mem.recall("", spatial_sort=spatial_sort)
    assert err.value.field == field
    with pytest.raises(ValidationError) as err:
        mem.outcome_stats("spatial.pos", spatial_sort=spatial_sort if "max_distance" in spatial_sort
                          else {**spatial_sort, "max_distance": 1.0})
    assert err.value.field == field


def test_a_3d_point_against_a_2d_target_is_compared_by_x_and_y(mem: Memory):
    mid = mem.learn("tall marker", context={"spatial": {"pos": [3, 4, 100]}})["memory_id"]
    hits = mem.recall("", spatial_sort={"field": "spatial.pos", "target": [0, 0]})["results"]
    assert [(h["id"], h["distance"]) for h in hits] == [(mid, 5.0)]


def _shelves(count: int, offset: float = 0.0) -> dict:
    return {"spatial": {f"shelf{i}": [float(i) + offset, 0.0] for i in range(count)}, "task": {"name": "map"}}


@pytest.mark.parametrize("shelf", [0, 63, 64, 69, 999])
def test_spatial_sort_finds_a_memory_on_any_of_its_points_not_only_the_first_64(mem: Memory, shelf: int):
    # points after the 64th were left out of the index: spatial_sort missed a field a filter found
    mid = mem.learn("warehouse map with a thousand shelf positions", context=_shelves(1000))["memory_id"]
    mem.learn("another memory near the same place", {"spatial": {"p": [float(shelf), 0.0]}})
    asked = {"field": f"spatial.shelf{shelf}", "target": [shelf, 0], "max_distance": 0.5}
    # walked in the tree, and read by id under a selective filter
    for context_filter in (None, {"task.name": "map"}):
        hits = mem.recall("", spatial_sort=asked, context_filter=context_filter)["results"]
        assert [(h["id"], h["distance"]) for h in hits] == [(mid, 0.0)], context_filter
    assert [h["id"] for h in mem.recall("", context_filter={f"spatial.shelf{shelf}": {"$exists": True}})["results"]] \
        == [mid]


def test_updating_a_memory_with_more_than_64_points_moves_every_one(mem: Memory):
    mid = mem.learn("warehouse map with seventy shelf positions", context=_shelves(70))["memory_id"]
    mem.update(mid, "warehouse map with seventy shelf positions", context=_shelves(70, offset=100.0))
    old = {"field": "spatial.shelf69", "target": [69, 0], "max_distance": 0.5}
    new = {"field": "spatial.shelf69", "target": [169, 0], "max_distance": 0.5}
    assert mem.recall("", spatial_sort=old)["results"] == []
    assert [h["id"] for h in mem.recall("", spatial_sort=new)["results"]] == [mid]


def test_spatial_sort_reads_a_dot_path_as_filters_do(mem: Memory):
    # a key holding a dot ("p.q") was found by spatial_sort on "spatial.p.q", which filters read
    # as p -> q: the one rule (data-model.md) is that a path's keys hold no dot
    literal = mem.learn("key with a dot in spatial", {"spatial": {"p.q": [3.0, 3.0]}})["memory_id"]
    nested = mem.learn("nested keys in spatial", {"spatial": {"p": {"q": [3.0, 4.0]}}})["memory_id"]
    asked = {"field": "spatial.p.q", "target": [3, 3], "max_distance": 2}
    assert [h["id"] for h in mem.recall("", spatial_sort=asked)["results"]] == [nested]
    assert [h["id"] for h in mem.recall("", context_filter={"spatial.p.q": {"$exists": True}})["results"]] == [nested]
    assert mem.get(literal)["context"]["spatial"] == {"p.q": [3.0, 3.0]}  # kept as given


def test_spatial_sort_finds_a_point_inside_a_point_object_as_a_filter_does(mem: Memory):
    mid = mem.learn("pose with its goal", {"spatial": {"pose": {"x": 5, "y": 5, "goal": [0, 0]}}, "task": {"name": "go"}})
    for context_filter in (None, {"task.name": "go"}):  # the tree walk, and points read by id
        for field, target in (("spatial.pose.goal", [0, 0]), ("spatial.pose", [5, 5])):
            asked = {"field": field, "target": target, "max_distance": 1}
            hits = mem.recall("", spatial_sort=asked, context_filter=context_filter)["results"]
            assert [(h["id"], h["distance"]) for h in hits] == [(mid["memory_id"], 0.0)], (field, context_filter)
    assert [h["id"] for h in mem.recall("", context_filter={"spatial.pose.goal": {"$exists": True}})["results"]] \
        == [mid["memory_id"]]


#: Contexts whose points the rules before SQLite's migration 21 (PostgreSQL's 9) indexed otherwise.
_OLD_RULES: dict[str, dict[str, Any]] = {
    "map": _shelves(70),  # its first 64 points only
    "dotted": {"spatial": {"p.q": [3.0, 3.0]}},  # spatial.p.q indexed
    "pose": {"spatial": {"pose": {"x": 5.0, "y": 5.0, "goal": [0.0, 0.0]}}},  # spatial.pose.goal not indexed
    "nested": {"spatial": {"p": {"q": [3.0, 4.0]}}},  # as it was
}
_ASKED = [{"field": "spatial.shelf69", "target": [69, 0], "max_distance": 0.5},
          {"field": "spatial.shelf10", "target": [10, 0], "max_distance": 0.5},
          {"field": "spatial.p.q", "target": [3, 3], "max_distance": 2},
          {"field": "spatial.pose.goal", "target": [0, 0], "max_distance": 1},
          {"field": "spatial.pose", "target": [5, 5], "max_distance": 1}]


def _spatial_answers(mem: Memory) -> list[list[tuple[int, Any]]]:
    return [[(h["id"], h["distance"]) for h in mem.recall("", spatial_sort=asked)["results"]] for asked in _ASKED]


def _index_as_before(db_path: Any, backend: str, ids: dict[str, int]) -> None:
    """The store's point index as robotmem wrote it before the rules changed, its schema rewound."""
    if backend == "sqlite":
        conn = apsw.Connection(str(Path(db_path)))
        tree, dotted, goal = "spatial_points_e0", ids["dotted"] * 64, ids["pose"] * 64 + 1
        for table in (tree, "points"):
            conn.execute(f"DELETE FROM {table} WHERE id < 0")  # the points after the 64th
            conn.execute(f"DELETE FROM {table} WHERE id = ?", (goal,))
        conn.execute(f"INSERT INTO {tree} VALUES (?, 3, 3, 3, 3, 0, 0)", (dotted,))
        conn.execute("INSERT INTO points VALUES (?, ?, 'spatial.p.q', 3, 3, 0)", (dotted, ids["dotted"]))
        conn.execute("PRAGMA user_version = 20")
        conn.close()
        return
    import psycopg

    with psycopg.connect(db_path, autocommit=True) as admin:
        admin.execute("DELETE FROM spatial_points WHERE memory_id = %s AND field = ANY(%s)",
                      (ids["map"], [f"spatial.shelf{i}" for i in range(64, 70)]))
        admin.execute("DELETE FROM spatial_points WHERE memory_id = %s AND field = 'spatial.pose.goal'", (ids["pose"],))
        admin.execute("INSERT INTO spatial_points VALUES (%s, 'spatial.p.q', point(3, 3), 0)", (ids["dotted"],))
        admin.execute("DELETE FROM robotmem_schema WHERE version >= 9")


def test_a_store_indexed_by_the_old_rules_migrates_to_the_answers_of_a_fresh_one(db_path: Any, backend: str):
    with Memory(db_path, embedder=None) as mem:
        ids = {name: mem.learn(name, context)["memory_id"] for name, context in _OLD_RULES.items()}
        fresh = _spatial_answers(mem)
    assert fresh == [[(ids["map"], 0.0)], [(ids["map"], 0.0)], [(ids["nested"], 1.0)], [(ids["pose"], 0.0)],
                     [(ids["pose"], 0.0)]]
    _index_as_before(db_path, backend, ids)
    with Memory(db_path, embedder=None) as mem:  # migrates
        assert _spatial_answers(mem) == fresh
    with Memory(db_path, embedder=None) as mem:  # and again: nothing left to change
        assert _spatial_answers(mem) == fresh


def test_points_of_tiny_coordinates_do_not_break_later_writes(mem: Memory):
    # PostgreSQL's GiST multiplied differences of 1e-300 into an underflow error: once its pages
    # held such boxes, 29 of 32 later writes of a point failed (StorageError)
    rng = random.Random(1)
    tiny = (0.0, 1e-300, 2e-300, 5e-324)
    ids = mem.save_perceptions([{"description": f"tiny point {i}", "metadata": {
        "spatial": {"p": [rng.choice(tiny), rng.choice(tiny)]}}} for i in range(600)])
    later = [mem.learn(f"a later note {i}", {"spatial": {"p": [rng.choice(tiny), 1e-300]}})["memory_id"]
             for i in range(20)]
    hits = mem.recall("", n=100, spatial_sort={"field": "spatial.p", "target": [0, 0], "max_distance": 1e-90})
    assert hits["count"] == 100 and {h["distance"] for h in hits["results"]} == {0.0}
    assert len(ids) == 600 and len(later) == 20
    assert mem.get(later[-1])["context"]["spatial"]["p"][1] == 1e-300  # the context keeps what was given


def test_a_target_is_compared_as_points_are_indexed(mem: Memory):
    # a target at 1e-200 put the origin at a shown distance of 0 (its square underflows) but
    # max_distance 0 dropped it; tiny coordinates count as 0 for targets as for points
    origin = mem.learn("at the origin", {"spatial": {"p": [0.0, 0.0, 0.0]}})["memory_id"]
    near = mem.learn("a hair off the origin", {"spatial": {"p": [1e-200, 0.0, 1e-300]}})["memory_id"]
    for target in ([0.0, 0.0, 1e-200], [1e-200, 1e-200], [0.0, 0.0]):
        hits = mem.recall("", spatial_sort={"field": "spatial.p", "target": target, "max_distance": 0.0})["results"]
        assert [(h["id"], h["distance"]) for h in hits] == [(near, 0.0), (origin, 0.0)]
