"""English word stems for coverage beside exact values (robotmem.search.stems)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from robotmem.search.stems import is_stemmable, word_stem


@pytest.mark.parametrize("forms", [("dressing", "dresses", "dressed"), ("caps", "cap"), ("welds", "weld", "welding"),
                                   ("reactivated", "reactivation")])
def test_inflections_share_a_stem(forms: tuple[str, ...]):
    assert len({word_stem(w) for w in forms}) == 1


def test_different_words_keep_different_stems():
    assert word_stem("firmware") != word_stem("hardware")
    assert word_stem("cap") != word_stem("capacity")


@pytest.mark.parametrize("token, stemmable", [("dressing", True), ("ng", False), ("12.5n", False), ("rg2", False),
                                              ("grip_force", False), ("夹持力", False), ("caps", True)])
def test_only_english_words_of_three_letters_or_more_are_stemmed(token: str, stemmable: bool):
    assert is_stemmable(token) is stemmable


def test_stems_from_many_threads_are_the_stems_of_one():
    # The Snowball stemmer keeps state while it works; the shared instance is used under a lock.
    words = [f"{base}{suffix}" for base in ("dress", "weld", "clamp", "grip", "spray", "coat") for suffix in
             ("", "s", "ing", "ed", "er", "ers", "ings", "ment", "ness", "ation")]
    expected = {w: word_stem.__wrapped__(w) for w in words}
    word_stem.cache_clear()
    with ThreadPoolExecutor(8) as pool:
        for _ in range(20):
            assert dict(zip(words, pool.map(word_stem, words))) == expected
            word_stem.cache_clear()
