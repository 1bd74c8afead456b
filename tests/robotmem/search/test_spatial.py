import math
import random

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
