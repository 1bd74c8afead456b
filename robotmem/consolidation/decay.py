"""Decay and the archive floor.

Decay is never written: a memory stores ``confidence`` as of ``reinforced_at`` and every
read computes ``confidence * 2^(-(now - reinforced_at) / half_life)`` (protected memories
do not decay). This pass only moves memories across the archive floor, in both
directions, so the state after it depends on the stored rows and ``now`` alone --
running it once or a hundred times at the same clock gives the same result.

Before that it repairs what a wrong clock stamped (docs/consolidation.md, "Clocks"): under
a set clock (a reading from PLAUSIBLE_SINCE on), a ``reinforced_at`` from an unset clock
(before PLAUSIBLE_SINCE) or more than FUTURE_TOLERANCE_S ahead of the reading is moved to the
reading, so it decays from the present. An unset clock archives, restores and restamps
nothing, and neither does a clock the collection judges behind it (more of its live memories stamped ahead
of the reading than not, and at least CLOCK_QUORUM of them: a clock reset at boot, not a
corrected one).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import apsw

from ..store.backend import dialect_of
from ..store.clockwatch import CLOCK_QUORUM, stamps_ahead
from ..store.decay import FUTURE_TOLERANCE_S, PLAUSIBLE_SINCE, effective_confidence_sql

__all__ = ["CLOCK_QUORUM", "DECAYED_EPSILON", "DecayCounts", "decay_pass"]

log = logging.getLogger("robotmem")

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
    #: memories whose reinforced_at a wrong clock had stamped, moved to now
    restamped: int = 0


def decay_pass(
    conn: apsw.Connection, collection: str | None, now: float, *, half_life_s: float, floor: float
) -> DecayCounts:
    """Restamp what a wrong clock stamped; archive what decayed below ``floor``; restore archived
    memories that are above it. At most five statements, none of them on every ``learn``."""
    conf, conf_params = effective_confidence_sql(now, half_life_s, dialect=dialect_of(conn))
    where, params = ("m.collection = ?", [collection]) if collection is not None else ("TRUE", [])
    trusted = now >= PLAUSIBLE_SINCE and not _clock_behind(conn, where, params, now)
    restamped = archived = 0
    if trusted:
        conn.execute(
            f"UPDATE memories AS m SET reinforced_at = ?, updated_at = ? WHERE {where} "
            "AND m.status IN ('active', 'archived') AND (m.reinforced_at > ? OR m.reinforced_at < ?)",
            (now, now, *params, now + FUTURE_TOLERANCE_S, PLAUSIBLE_SINCE),
        )
        restamped = int(conn.changes())
        if restamped:
            log.warning("consolidation: %d memories of %s were stamped by a wrong clock (before %.0f, or more "
                        "than %.0f s after now %.3f); their decay restarts from now", restamped,
                        "every collection" if collection is None else repr(collection), PLAUSIBLE_SINCE,
                        FUTURE_TOLERANCE_S, now)
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
    # Not under a clock behind the stamps: every archived memory looks unaged to it.
    restored = int(conn.changes()) if trusted else 0
    row = conn.execute(
        f"SELECT count(*) FROM memories AS m WHERE {where} AND m.status = 'active' AND NOT m.protected "
        f"AND m.confidence - {conf} > ?",
        (*params, *conf_params, DECAYED_EPSILON),
    ).fetchone()
    assert row is not None  # count(*) always returns a row
    return DecayCounts(archived=archived, restored=restored, decayed=int(row[0]), restamped=restamped)


def _clock_behind(conn: apsw.Connection, where: str, params: list[str], now: float) -> bool:
    """Whether the collection's live memories put the clock behind them (StampsAhead.set_back)."""
    ahead = stamps_ahead(conn, where, params, now)
    behind = ahead.set_back(now)
    if behind:
        log.warning("consolidation: the clock reads %.3f but %d of %d live memories%s are stamped more than %.0f s "
                    "after it, from %.3f to %.3f: taken for a clock set back (reset at boot, or behind the fleet), "
                    "so nothing is archived, restored or restamped until it is set", now, ahead.count, ahead.total,
                    "" if where == "TRUE" else f" of {params[0]!r}", FUTURE_TOLERANCE_S, ahead.first, ahead.last)
    return behind
