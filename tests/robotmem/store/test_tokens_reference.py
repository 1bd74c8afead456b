"""Tokenization with the faster token pattern and the single-part fast path gives what it gave before.

The reference is the pattern with one character per repetition and ``_expand`` called for
every token that is not a plain word.
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from robotmem.store import tokens

_REFERENCE_TOKEN_RE = re.compile(rf"{tokens._NUMBER}|[^\W_](?:[\w]|[._](?=[^\W_]))*", re.UNICODE)


def reference_raw_tokens(text: str) -> list[str]:
    folded = tokens._fold(text)
    return [piece.replace(",", ".") for match in _REFERENCE_TOKEN_RE.finditer(folded)
            for piece in tokens._split_cjk(match.group(0))]


def reference_index_tokens(text: str) -> str:
    out: list[str] = []
    for token in reference_raw_tokens(text):
        out.extend([token] if token.isalpha() else tokens._expand(token))
    return " ".join(out)


def reference_memory_search_text(content: str, context: dict[str, Any] | None) -> str:
    text = reference_index_tokens(content)
    leaves = tokens._identifier_leaves(context) if context else []
    if not leaves:
        return text
    have = set(text.split())
    extra: list[str] = []
    for leaf in leaves:
        leaf_tokens = reference_index_tokens(leaf).split()
        if any(t not in have for t in leaf_tokens):
            extra.extend(leaf_tokens)
            have.update(leaf_tokens)
    return " ".join([text, *extra]) if extra else text


# Characters where the token pattern and the part splitting have edges: numbers with units and
# separators, snake_case and dotted names, non-ASCII digits (Arabic-Indic, superscript, fractions),
# CJK and kana, combining marks, Unicode whitespace.
TOKEN_TEXT = st.one_of(
    st.text(st.sampled_from(list("ab Zx1 09._,-+%°µ/:_") + ["\u0663", "\u00b2", "\u00bd", "\u216b", "\u00e9",
                                                           "\u0301", "\u4e2d", "\u6587", "\u30dc", "\u2028",
                                                           "\x1c", "\t", "\ufb01", "\uff27"]), max_size=24),
    st.text(max_size=24),
)
CONTEXTS = st.recursive(
    st.one_of(TOKEN_TEXT, st.integers(), st.floats(allow_nan=False), st.booleans(), st.none()),
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(st.text(max_size=3), children,
                                                                               max_size=3)),
    max_leaves=10,
)


@settings(max_examples=2000)
@given(TOKEN_TEXT)
def test_index_and_query_tokens_match_the_reference(text: str) -> None:
    assert tokens.index_tokens(text) == reference_index_tokens(text)
    assert tokens.query_tokens(text) == list(dict.fromkeys(reference_raw_tokens(text)))


@settings(max_examples=1000)
@given(TOKEN_TEXT, st.one_of(st.none(), st.dictionaries(st.text(max_size=3), CONTEXTS, max_size=4)))
def test_memory_search_text_matches_the_reference(content: str, context: dict[str, Any] | None) -> None:
    assert tokens.memory_search_text(content, context) == reference_memory_search_text(content, context)
