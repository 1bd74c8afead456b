"""Consolidation's caches of texts are bounded by the texts' length, not only by their number:
what each entry holds grows with its text, and a server ends episodes for months."""

from __future__ import annotations

import json
import random
import tracemalloc

import pytest

from robotmem.consolidation import pool, similarity
from robotmem.consolidation.sized_cache import SizedCache
from robotmem.search.stems import word_stem


def _context(i: int, keys: int) -> str:
    rnd = random.Random(i)
    return json.dumps({"task": {"name": "pick"}, "params": {f"joint_{k}": round(rnd.random(), 6) for k in range(keys)},
                       "i": i}, separators=(",", ":"))


def _held(fn: object, texts: list[str]) -> int:
    """Bytes the cache of ``fn`` holds after it is called with ``texts`` (each a new string)."""
    fn.cache_clear()  # type: ignore[attr-defined]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for text in texts:
            fn(text)  # type: ignore[operator]
        # The caches of single words (bounded by count, a few bytes each) are not this cache's.
        similarity._word_marker.cache_clear()
        word_stem.cache_clear()
        return int(tracemalloc.get_traced_memory()[0] - before)
    finally:
        tracemalloc.stop()
        fn.cache_clear()  # type: ignore[attr-defined]


#: The caches scaled down 64 times (the same characters an entry), so that a test fills them.
_SCALE = 64


def _scaled(monkeypatch: pytest.MonkeyPatch, fn: object, entries: int, chars: int) -> int:
    monkeypatch.setattr(fn, "max_entries", entries // _SCALE)
    monkeypatch.setattr(fn, "max_chars", chars // _SCALE)
    return entries // _SCALE


def test_large_contexts_are_cached_within_the_memory_small_ones_take(monkeypatch: pytest.MonkeyPatch) -> None:
    """Contexts of 3,000 params (64 KB of JSON each, within the limits) were kept 65,536 at a time
    (about 35 GB); now in about the memory the bound's count of ordinary contexts takes."""
    entries = _scaled(monkeypatch, pool._parse_context, 65_536, 12 << 20)
    per_small = _held(pool._parse_context, [_context(i, 8) for i in range(entries)]) / entries
    held_large = _held(pool._parse_context, [_context(i, 3_000) for i in range(entries // 4)])
    # Twice: a large context's parse holds fewer bytes a character than a small one's, not none.
    assert held_large <= 2 * entries * per_small


def test_long_texts_are_cached_within_the_memory_facts_take(monkeypatch: pytest.MonkeyPatch) -> None:
    entries = _scaled(monkeypatch, similarity.signature, 65_536, 6 << 20)
    rnd = random.Random(0)
    words = ["grip", "cup", "shelf", "slowly", "rotate", "valve", "bin", "tray", "edge", "marker"]
    facts = [" ".join(rnd.choice(words) for _ in range(14)) + f" near marker {i}" for i in range(entries)]
    long = [" ".join(f"{rnd.choice(words)}{rnd.randint(0, 10**6)}" for _ in range(200))[:2_000]
            for _ in range(entries // 4)]
    per_fact = _held(similarity.signature, facts) / entries
    assert _held(similarity.signature, long) <= 2 * entries * per_fact


def test_the_oldest_go_first_and_the_count_bounds_too() -> None:
    calls: list[str] = []
    cache = SizedCache(lambda t: calls.append(t) or len(t), max_entries=3, max_chars=10)
    for text in ["aaaa", "bbbb", "aaaa", "cccc"]:  # "aaaa" used again: "bbbb" is the oldest
        cache(text)
    assert calls == ["aaaa", "bbbb", "cccc"] and cache.cache_info().chars == 8
    cache("bbbb")
    assert calls[-1] == "bbbb"
    for text in ["d", "e", "f"]:
        cache(text)
    assert cache.cache_info().currsize == 3
    cache("x" * 11)  # longer than the whole bound: computed, never kept
    assert cache.cache_info().currsize == 3 and cache("x" * 11) == 11 and calls.count("x" * 11) == 2
