"""The decay law's SQL and numpy renderings agree with each other and with the law as written by hand."""

from __future__ import annotations

import math

import apsw
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from robotmem.store.decay import (
    PLAUSIBLE_SINCE,
    decayed_confidence,
    effective_confidence,
    effective_confidence_sql,
)

rows = st.lists(
    st.tuples(
        st.floats(0.0, 1.0),
        st.floats(0.0, 2e9),
        st.booleans(),
    ),
    min_size=1, max_size=20,
)


def by_hand(c0: float, reinforced_at: float, protected: bool, now: float, half_life_s: float) -> float:
    # A stamp from an unset clock (before 2020) has age 0 until consolidation restamps it.
    age = max(0.0, now - reinforced_at) if reinforced_at >= PLAUSIBLE_SINCE else 0.0
    return c0 if protected else c0 * math.pow(2.0, -age / half_life_s)


@settings(max_examples=150, deadline=None)
@given(rows=rows, now=st.floats(0.0, 2e9), half_life_s=st.floats(1.0, 1e8))
def test_sql_numpy_and_scalar_decay_agree(rows, now, half_life_s):
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE TABLE memories (id INTEGER PRIMARY KEY, confidence REAL, reinforced_at REAL, protected INT)")
    conn.executemany("INSERT INTO memories (confidence, reinforced_at, protected) VALUES (?, ?, ?)",
                     [(c, t, int(p)) for c, t, p in rows])
    expr, params = effective_confidence_sql(now, half_life_s)
    in_sql = [v for (v,) in conn.execute(f"SELECT {expr} FROM memories m ORDER BY m.id", params)]
    c0, t, p = (np.array(col) for col in zip(*rows))
    in_numpy = decayed_confidence(c0, t, p.astype(bool), now, half_life_s)
    expected = [by_hand(c, r, pr, now, half_life_s) for c, r, pr in rows]
    assert np.allclose(in_sql, expected, rtol=1e-12, atol=1e-15)
    assert np.allclose(in_numpy, expected, rtol=1e-12, atol=1e-15)
    assert np.allclose([effective_confidence(c, r, pr, now, half_life_s) for c, r, pr in rows], expected,
                       rtol=1e-12, atol=1e-15)
