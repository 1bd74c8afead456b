"""A least-recently-used cache of a function of one text, bounded by its texts' total length too.

``functools.lru_cache`` bounds the number of entries only, and what consolidation caches per
text grows with the text: 2.2 kB for a 90-character fact's signature, 65 kB for a 2,000-character
description's; 3.0 kB for a 156-character context parsed, 530 kB for a 64 KiB one. So 65,536
entries were 300 MB of ordinary facts but tens of gigabytes of allowed ones, in a server that
ends episodes for months. Bounding the characters too keeps the ordinary case as it was and
the large one in proportion.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, NamedTuple, TypeVar, cast

__all__ = ["CacheInfo", "SizedCache", "cache_by_length"]

T = TypeVar("T")


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    currsize: int
    chars: int


class SizedCache(Generic[T]):
    """``fn`` cached: at most ``max_entries`` texts of at most ``max_chars`` characters in all."""

    def __init__(self, fn: Callable[[str], T], max_entries: int, max_chars: int) -> None:
        self.__wrapped__ = fn
        self.__doc__ = fn.__doc__
        self.max_entries, self.max_chars = max_entries, max_chars
        self._entries: OrderedDict[str, T] = OrderedDict()
        self._chars = self._hits = self._misses = 0
        self._lock = threading.Lock()

    def __call__(self, text: str) -> T:
        with self._lock:
            found = self._entries.get(text, _MISSING)
            if found is not _MISSING:
                self._entries.move_to_end(text)
                self._hits += 1
                return cast(T, found)
            self._misses += 1
        value = self.__wrapped__(text)  # outside the lock: two threads may compute one text twice
        if len(text) > self.max_chars:
            return value
        with self._lock:
            if text not in self._entries:
                self._entries[text] = value
                self._chars += len(text)
                while len(self._entries) > self.max_entries or self._chars > self.max_chars:
                    old, _ = self._entries.popitem(last=False)
                    self._chars -= len(old)
        return value

    def cache_info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, len(self._entries), self._chars)

    def cache_clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._chars = self._hits = self._misses = 0


_MISSING = object()


def cache_by_length(max_entries: int, max_chars: int) -> Callable[[Callable[[str], T]], SizedCache[T]]:
    def wrap(fn: Callable[[str], T]) -> SizedCache[T]:
        return SizedCache(fn, max_entries, max_chars)

    return wrap
