"""English word stems, so that coverage finds a word in another form ("dressing" in "dresses").

The full-text index stores words as written (robotmem.store.tokens: exact values and
identifiers must stay whole), so BM25 finds "cap dressing" only where the memory says "cap"
and "dressing". Coverage, which decides the ranking among the candidates, also counts a
query word held in another inflection of the same stem. Snowball's English (Porter 2)
stemmer is the standard one; it is not thread-safe, so calls share one instance under a
lock, and the stems of the few thousand words a store repeats are cached.
"""

from __future__ import annotations

import threading
from functools import lru_cache

import snowballstemmer

__all__ = ["is_stemmable", "word_stem"]

_STEMMER = snowballstemmer.stemmer("english")
_LOCK = threading.Lock()


def is_stemmable(token: str) -> bool:
    """An English word of three letters or more: not a value, an identifier or CJK text."""
    return len(token) >= 3 and token.isascii() and token.isalpha()


@lru_cache(maxsize=65_536)
def word_stem(word: str) -> str:
    """The word's Snowball English stem ("dressing", "dresses" -> "dress")."""
    with _LOCK:
        return str(_STEMMER.stemWord(word))
