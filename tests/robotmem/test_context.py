"""The canonical JSON of a context (robotmem.context): stored content hashes depend on its exact text."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from robotmem.context import canonical_json, content_hash

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
