"""The vector index and SQL pick the same eligible rows (status, confidence, protection, archive, time window).

Recall checks eligibility in two places: in SQL (full-text hits, filter candidates) and in
the in-process vector index (hybrid recall without a context filter). Both render one rule
(search/eligibility.py); both are compared here with a plain-Python statement of the rules,
so a rule lost from the shared statement or from either rendering fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from robotmem.search import sql
from robotmem.search.eligibility import Eligibility
from robotmem.search.request import RecallRequest
from robotmem.search.vector_index import VectorIndex
from robotmem.store import memories as mstore
from robotmem.store.connection import Database
from robotmem.store.migrations import migrate

HALF_LIFE_S = 1000.0
NOW = 1_800_010_000.0  # a set clock: stamps before 2020 are an unset clock's (store.decay.PLAUSIBLE_SINCE)
DIM = 4
MODEL = "test-model"


@dataclass(frozen=True)
class Row:
    collection: str
    status: str
    confidence: float
    reinforced_at: float
    protected: bool
    occurred_at: float


times = st.integers(0, 10).map(lambda t: NOW - 500.0 * t)  # coarse, so windows often fall on a row's time
row_strategy = st.builds(
    Row,
    collection=st.sampled_from(["here", "here", "here", "elsewhere"]),
    status=st.sampled_from(["active", "active", "archived", "superseded", "forgotten"]),
    confidence=st.sampled_from([0.05, 0.2, 0.3, 0.5, 0.8, 1.0]),
    reinforced_at=times,
    protected=st.booleans(),
    occurred_at=times,
)
windows = st.one_of(st.none(), times)


def reference(row: Row, req: RecallRequest) -> bool:
    """The eligibility rules as the documentation states them."""
    if row.collection != req.collection:
        return False
    if row.status not in (("active", "archived") if req.min_confidence == 0 else ("active",)):
        return False
    decayed = row.confidence if row.protected else row.confidence * 2.0 ** (
        -max(0.0, NOW - row.reinforced_at) / HALF_LIFE_S)
    if req.min_confidence > 0 and decayed < req.min_confidence:
        return False
    if req.since is not None and row.occurred_at < req.since:
        return False
    return req.until is None or row.occurred_at <= req.until


def fill(db: Database, rows: list[Row]) -> dict[int, Row]:
    stored = {}
    rng = np.random.default_rng(0)
    with db.write() as conn:
        migrate(conn)
        for i, row in enumerate(rows):
            memory_id = mstore.insert_memory(conn, mstore.NewMemory(
                collection=row.collection, session_id=None, type="fact", perception_type=None,
                content=f"memory {i}", search_text=f"memory {i}", context={}, content_hash=f"h{i}",
                protected=row.protected, confidence=row.confidence, now=row.reinforced_at,
                occurred_at=row.occurred_at,
            ))
            conn.execute("UPDATE memories SET status = ? WHERE id = ?", (row.status, memory_id))
            mstore.put_embedding(conn, memory_id, row.collection, MODEL, rng.normal(size=DIM))
            stored[memory_id] = row
    return stored


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(row_strategy, min_size=1, max_size=25),
    min_confidence=st.sampled_from([0.0, 0.0, 0.1, 0.25, 0.5, 0.8]),
    since=windows,
    until=windows,
)
def test_vector_index_and_sql_pick_the_same_rows(rows, min_confidence, since, until):
    req = RecallRequest(query="memory", collection="here", n=10, min_confidence=min_confidence,
                        since=since, until=until)
    db = Database(Path(":memory:"))  # the same SQL as on a file, without the disk: fast enough for 200 cases
    try:
        stored = fill(db, rows)
        expected = {memory_id for memory_id, row in stored.items() if reference(row, req)}
        with db.read() as conn:
            q, p = sql.candidates_sql(req, NOW, HALF_LIFE_S)
            in_sql = {row[0] for row in conn.execute(q, p)}
            index = VectorIndex("here", MODEL, DIM)
            index.sync(conn)
        rules = Eligibility.of(req, NOW, HALF_LIFE_S)
        found = index.search(np.ones(DIM, dtype=np.float32), len(rows) + 1, rules, min_similarity=-np.inf)
        in_index = {memory_id for memory_id, _ in found}
    finally:
        db.close()
    assert in_sql == expected
    assert in_index == expected
