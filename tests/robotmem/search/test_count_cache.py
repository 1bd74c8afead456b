"""Counts that only steer a plan are reused while the store is nearly the same; answers stay exact."""

from __future__ import annotations

from pathlib import Path

import apsw

from robotmem import Memory
from robotmem.search.count_cache import CountCache, StoreStamp, store_stamp


def test_a_count_is_reused_until_the_store_moves_by_one_percent():
    cache: CountCache[int] = CountCache()
    taken = StoreStamp("/s.db", max_id=10_000, seq=500)
    cache.put(taken, "word", 42)
    assert cache.get(StoreStamp("/s.db", 10_100, 500), "word") == 42  # 100 new memories: 1 %
    assert cache.get(StoreStamp("/s.db", 10_000, 600), "word") == 42  # 100 changes
    assert cache.get(StoreStamp("/s.db", 10_102, 500), "word") is None  # more than 1 %
    assert cache.get(StoreStamp("/s.db", 10_000, 602), "word") is None
    assert cache.get(StoreStamp("/other.db", 10_000, 500), "word") is None
    assert cache.get(taken, "another word") is None


def test_small_stores_and_stores_in_memory_recount():
    cache: CountCache[int] = CountCache()
    cache.put(StoreStamp("/s.db", 50, 0), "word", 1)
    assert cache.get(StoreStamp("/s.db", 50, 0), "word") == 1
    assert cache.get(StoreStamp("/s.db", 51, 0), "word") is None  # under 100 memories: any change
    cache.put(StoreStamp("", 5000, 0), "word", 1)
    assert cache.get(StoreStamp("", 5000, 0), "word") is None
    assert store_stamp(apsw.Connection(":memory:")) == StoreStamp("", 0, 0)


def test_the_oldest_count_goes_first_beyond_the_limit():
    cache: CountCache[int] = CountCache(limit=2)
    stamp = StoreStamp("/s.db", 1000, 0)
    for word in ("a", "b", "c"):
        cache.put(stamp, word, 1)
    assert [cache.get(stamp, w) for w in ("a", "b", "c")] == [None, 1, 1]


def test_a_filter_counted_before_its_matches_arrived_still_finds_them(tmp_path: Path):
    """The count of a filter's leaf range decides only how the filter is evaluated: counted as
    empty and reused after a few matching memories arrive, it still returns exactly them."""
    with Memory(tmp_path / "s.db", embedder=None) as mem:
        mem.save_perceptions([{"description": f"grasp trial {i}", "metadata": {"task": {"batch": i % 50}}}
                              for i in range(2000)])
        flt = {"task.batch": 777}
        assert mem.recall("grasp", context_filter=flt)["results"] == []  # counted: no memory has it
        new = {mem.learn(f"grasp trial of batch 777 number {i}", {"task": {"batch": 777}})["memory_id"]
               for i in range(5)}
        found = mem.recall("grasp", context_filter=flt, n=10, min_relevance=0)["results"]
        assert {h["id"] for h in found} == new
        by_filter_only = mem.recall("", context_filter=flt, n=10)["results"]
        assert {h["id"] for h in by_filter_only} == new
