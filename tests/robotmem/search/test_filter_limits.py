"""Filter keys with quotes/backslashes match, and filters past SQLite's limits are refused cleanly."""

from __future__ import annotations

import pytest

from robotmem import Memory, ValidationError
from robotmem.search.filters import MAX_FILTER_COMPARISONS, MAX_FILTER_DEPTH


@pytest.mark.parametrize("key", ['grip"force', 'a"]', "back\\slash", '\\"', "a]", "a[0]", "x y", "ünï"])
def test_filter_keys_with_quotes_and_backslashes_match(mem: Memory, key: str) -> None:
    wanted = mem.learn("key with odd characters", context={"params": {key: 5}})["memory_id"]
    mem.learn("another memory with the same odd key", context={"params": {key: 6}})
    got = mem.recall("", context_filter={f"params.{key}": 5}, n=10)["results"]
    assert [r["id"] for r in got] == [wanted]
    got = mem.recall("", context_filter={f"params.{key}": {"$in": [5, 7]}}, n=10)["results"]
    assert [r["id"] for r in got] == [wanted]


def _seed(mem: Memory) -> list[int]:
    return [mem.learn(f"memory number {i}", context={"params": {"k": i}})["memory_id"] for i in range(3)]


@pytest.mark.parametrize("shape", ["or_of_eq", "in_list", "nin_list", "or_of_ne", "and_of_or", "several_in"])
def test_filters_at_the_comparison_limit_run(mem: Memory, shape: str) -> None:
    ids = _seed(mem)
    values = list(range(1000, 1000 + MAX_FILTER_COMPARISONS - 1)) + [1]
    half = MAX_FILTER_COMPARISONS // 2
    spec = {
        "or_of_eq": {"$or": [{"params.k": v} for v in values]},
        "in_list": {"params.k": {"$in": values}},
        "nin_list": {"params.k": {"$nin": values}},
        "or_of_ne": {"$or": [{"params.k": {"$ne": v}} for v in values]},
        "and_of_or": {"$and": [{"$or": [{"params.k": v} for v in values[:half]]},
                               {"$or": [{"params.k": v} for v in values[half:]]}]},
        "several_in": {"$and": [{"params.k": {"$in": values[i * 49 : (i + 1) * 49] + [1]}}
                                for i in range(MAX_FILTER_COMPARISONS // 50)]},
    }[shape]
    got = {r["id"] for r in mem.recall("", context_filter=spec, n=10)["results"]}
    expected = {"nin_list": {ids[0], ids[2]}, "or_of_ne": set(ids), "and_of_or": set()}.get(shape, {ids[1]})
    assert got == expected


@pytest.mark.parametrize("spec", [
    {"$or": [{"params.k": v} for v in range(1100)]},
    {"$and": [{f"params.k{i}": {"$in": list(range(500))}} for i in range(30)]},
    {"params.k": {"$in": list(range(MAX_FILTER_COMPARISONS)), "$ne": 3}},
])
def test_filters_beyond_the_limits_are_validation_errors(mem: Memory, spec: dict) -> None:
    _seed(mem)
    with pytest.raises(ValidationError) as err:
        mem.recall("", context_filter=spec)
    assert err.value.field is not None and err.value.field.startswith("context_filter")


def test_filter_nesting_beyond_the_depth_limit_is_a_validation_error(mem: Memory) -> None:
    spec: dict = {"params.k": 1}
    for _ in range(MAX_FILTER_DEPTH + 1):
        spec = {"$and": [spec]}
    with pytest.raises(ValidationError) as err:
        mem.recall("", context_filter=spec)
    assert err.value.field is not None and err.value.field.startswith("context_filter")
