"""The canonical JSON of a context (robotmem.context): stored content hashes depend on its exact text."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import pytest

from robotmem.context import (
    canonical_json, content_hash, content_hash_json, content_hashes, current_hash_of, earlier_hashes, nfkc_fold,
    normalize_text,
)

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(value=_JSON)
def test_the_canonical_form_is_sorted_compact_unescaped_json(value: Any) -> None:
    # The form every stored content hash was computed from: it must not drift with how it is made.
    assert canonical_json(value) == json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert json.loads(canonical_json(value)) == value


def test_a_stored_hash_stays_what_it_was() -> None:
    context = {"task": {"name": "pick", "ok": True}, "params": {"grip_force": 12.5, "ids": [1, 2]}, "robot": "机械臂"}
    assert canonical_json(context) == ('{"params":{"grip_force":12.5,"ids":[1,2]},"robot":"机械臂",'
                                       '"task":{"name":"pick","ok":true}}')
    assert content_hash("Grasp  the cube", context) == content_hash("grasp the CUBE", context)


@pytest.mark.parametrize("a, b", [
    ("max pressure 106 Pa", "max pressure 10⁶ Pa"), ("2 mm", "² mm"), ("tolerance 10\u22123", "tolerance 10⁻³"),
    ("H2O", "H₂O"), ("x n", "x ⁿ"), ("11⁄2", "1½"), ("12", "①②"), ("(1) open", "⑴ open"), ("1. open", "⒈ open")])
def test_superscripts_fractions_and_enclosed_numbers_keep_their_form(a: str, b: str) -> None:
    # NFKC folds each into the plain text beside it, and the number it says into another.
    assert nfkc_fold(a) == nfkc_fold(b)
    assert normalize_text(a) != normalize_text(b)
    assert content_hash(a, {}) != content_hash(b, {})


@pytest.mark.parametrize("a, b", [
    ("ＭＡＸ pressure １０６ Pa", "max pressure 106 pa"), ("a\u00a0b\u2003c", "a b c"), ("the ﬁnal grip", "the final grip"),
    ("𝟏𝟎 N", "10 n"), ("STRASSE", "straße"), ("ｶﾒﾗ", "カメラ"), ("10⁶ ｐａ", "10⁶ pa")])
def test_width_spaces_ligatures_and_case_still_fold(a: str, b: str) -> None:
    assert normalize_text(a) == normalize_text(b)


def test_negative_zero_hashes_as_zero_and_keeps_its_earlier_hashes() -> None:
    assert content_hash("t", {"v": -0.0}) == content_hash("t", {"v": 0.0}) != content_hash("t", {"v": 0})
    assert content_hashes("t", {"v": -0.0}) == (content_hash("t", {"v": 0.0}), content_hash_json("t", '{"v":-0.0}'))
    both = {"v": [-0.0, 1e17]}
    assert content_hashes("t", both) == (content_hash_json("t", '{"v":[0.0,100000000000000000]}'),
                                         content_hash_json("t", '{"v":[-0.0,100000000000000000]}'),
                                         content_hash_json("t", '{"v":[-0.0,1e+17]}'))
    assert content_hashes("t", {"s": "-0.0", "v": -0.01}) == (content_hash_json("t", '{"s":"-0.0","v":-0.01}'),)


def test_a_hash_of_the_earlier_fold_is_the_texts_own_but_never_looked_up() -> None:
    """``earlier_hashes`` holds the NFKC-fold hash of "10⁶", which is the hash of "106": a lookup
    by it would find the other fact, so ``content_hashes`` (what duplicate checks look up) leaves it out."""
    old = content_hash("max pressure 106 Pa", {})
    assert old in earlier_hashes("max pressure 10⁶ Pa", {})
    assert old not in content_hashes("max pressure 10⁶ Pa", {})
    assert current_hash_of("max pressure 10⁶ Pa", {}, False, old) == content_hash("max pressure 10⁶ Pa", {})
    assert current_hash_of("max pressure 10⁶ Pa", {}, False, content_hash("other", {})) is None
    ended = {"episode": {"outcome": 1.0}}
    assert current_hash_of("² mm", ended, True, content_hash("2 mm", {})) == content_hash("² mm", {})
