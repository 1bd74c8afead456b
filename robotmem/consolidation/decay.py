"""Decay and the archive floor.

Decay is never written: a memory stores ``confidence`` as of ``reinforced_at`` and every
read computes ``confidence * 2^(-(now - reinforced_at) / half_life)`` (protected memories
do not decay). This pass only moves memories across the archive floor, in both
directions, so the state after it depends on the stored rows and ``now`` alone --
running it once or a hundred times at the same clock gives the same result.
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw

from ..store.backend import dialect_of
from ..store.decay import effective_confidence_sql

__all__ = ["DECAYED_EPSILON", "DecayCounts", "decay_pass"]

#: A memory counts as "decayed" once it has lost more than this much confidence since
#: it was last reinforced (one percentage point: about 10 hours at the default half-life).
DECAYED_EPSILON = 0.01


@dataclass(frozen=True)
class DecayCounts:
    #: memories that fell below the floor in this pass
    archived: int
    #: archived memories back above the floor (reinforced elsewhere, protected since, half-life raised)
    restored: int
    #: active, unprotected memories now more than DECAYED_EPSILON below their stored confidence
    decayed: int


def decay_pass(
    conn: apsw.Connection, collection: str | None, now: float, *, half_life_s: float, floor: float
) -> DecayCounts:
    """Archive what decayed below ``floor``; restore archived memories that are above it. Three statements."""
    conf, conf_params = effective_confidence_sql(now, half_life_s, dialect=dialect_of(conn))
    where, params = ("m.collection = ?", [collection]) if collection is not None else ("TRUE", [])
    conn.execute(
        f"UPDATE memories AS m SET status = 'archived', updated_at = ? "
        f"WHERE {where} AND m.status = 'active' AND NOT m.protected AND {conf} < ?",
        (now, *params, *conf_params, floor),
    )
    archived = int(conn.changes())
    conn.execute(
        f"UPDATE memories AS m SET status = 'active', updated_at = ? "
        f"WHERE {where} AND m.status = 'archived' AND (m.protected OR {conf} >= ?)",
        (now, *params, *conf_params, floor),
    )
    restored = int(conn.changes())
    row = conn.execute(
        f"SELECT count(*) FROM memories AS m WHERE {where} AND m.status = 'active' AND NOT m.protected "
        f"AND m.confidence - {conf} > ?",
        (*params, *conf_params, DECAYED_EPSILON),
    ).fetchone()
    assert row is not None  # count(*) always returns a row
    return DecayCounts(archived=archived, restored=restored, decayed=int(row[0]))
