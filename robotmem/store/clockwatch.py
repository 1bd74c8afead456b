"""The service's watch over its clock: a reading that cannot be right is reported once.

A robot's clock is wrong in two ways that matter to decay (docs/consolidation.md, "Clocks"):
never set (an RTC lost at boot reads 1970), or set back behind the times the store already
holds (a reset to a firmware date, or NTP correcting a clock that ran ahead). Readings are
used as they are -- a clock behind the stamps makes memories look younger, never older, and
reinforcement never moves ``reinforced_at`` back -- but the first such reading of a run of
them is logged with the numbers, so a fleet's operator sees which robot's clock is off.

Two exceptions. A process that opens the store more than a day behind its newest time, under a
clock never set or one the store judges set back (StampsAhead.set_back: a board without an RTC
battery booted at its firmware date), continues the store's time from the newest time it holds
until the clock reaches that time (NTP synced): what it stamped at the firmware date was archived
at the sync, years behind the rest. And a reading at most STEP_BACK_S behind the latest time the
process used (NTP stepping back a little) waits for the clock to pass that time again.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from .decay import FUTURE_TOLERANCE_S, PLAUSIBLE_SINCE

__all__ = ["CLOCK_QUORUM", "STEP_BACK_S", "ClockWatch", "StampsAhead", "stamps_ahead"]

#: A reading at most this far behind the latest time a process used is NTP stepping its clock back
#: by a little: the process keeps that latest time until the clock passes it again, so its records
#: keep the order they were written in. A larger step is used as read (a clock ahead, corrected).
STEP_BACK_S = 900.0

#: How few live memories stamped ahead of the clock never make the store judge the clock behind
#: it rather than the stamps ahead of the clock (StampsAhead.set_back).
CLOCK_QUORUM = 10

log = logging.getLogger("robotmem")


def _iso(seconds: float) -> str:
    try:
        return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return f"{seconds:.3f}"


@dataclass(frozen=True)
class StampsAhead:
    """The live memories stamped more than FUTURE_TOLERANCE_S after a reading: how many, of how
    many, and the earliest and latest such stamp (0 when there is none)."""

    count: int
    total: int
    first: float
    last: float

    def set_back(self, now: float) -> bool:
        """Whether the clock reading ``now`` is taken for one set back rather than these stamps for
        ones a clock ahead wrote: at least CLOCK_QUORUM of them, and either more of them than the
        rest, or spread over at least as long as they lie ahead of the clock. A clock that ran
        ahead for an episode leaves a tight cluster far ahead (a year ahead, minutes apart); a clock
        reset to a firmware date months into a long history, or a fleet robot days behind the
        others, has stamps from just ahead of it to the newest. Taken for ahead stamps, those were
        moved back to the clock and archived once it was right (a robot 2 years in service, reset
        to a date 182 days back, lost every fact of the last 120 days)."""
        if self.count < CLOCK_QUORUM:
            return False
        return self.count > self.total - self.count or self.last - self.first >= self.first - now


def stamps_ahead(conn: Any, where: str, params: list[str], now: float) -> StampsAhead:
    """The live memories matching ``where`` stamped more than FUTURE_TOLERANCE_S after ``now``
    (one aggregate over them)."""
    edge = now + FUTURE_TOLERANCE_S
    row = conn.execute(
        "SELECT coalesce(sum(CASE WHEN m.reinforced_at > ? THEN 1 ELSE 0 END), 0), count(*), "
        "coalesce(min(CASE WHEN m.reinforced_at > ? THEN m.reinforced_at END), 0), "
        "coalesce(max(CASE WHEN m.reinforced_at > ? THEN m.reinforced_at END), 0) FROM memories AS m "
        f"WHERE {where} AND m.status IN ('active', 'archived')",
        (edge, edge, edge, *params),
    ).fetchone()
    assert row is not None  # an aggregate always returns a row
    return StampsAhead(int(row[0]), int(row[1]), float(row[2]), float(row[3]))


class ClockWatch:
    """Tracks the newest time seen (the store's newest stamp at open, then each reading) and
    warns once per run of readings that are unset (before PLAUSIBLE_SINCE) or more than
    FUTURE_TOLERANCE_S behind that time. Deterministic, O(1) per reading."""

    def __init__(self, store_newest: float | None) -> None:
        self.newest = store_newest
        self.warnings = 0
        #: while the clock reads behind it: the store's newest time and the reading at open
        self._held: tuple[float, float] | None = None
        #: the latest time effective() gave
        self._last: float | None = None
        self._warned: str | None = None
        self._lock = threading.Lock()

    def check(self, reading: float) -> None:
        with self._lock:
            if self._held is not None:
                return  # hold() said why this clock is not used as it reads
            newest = self.newest
            if reading < PLAUSIBLE_SINCE:
                state = "unset"
            elif newest is not None and reading < newest - FUTURE_TOLERANCE_S:
                state = "behind"
            else:
                state = None
            if state is not None and state != self._warned:
                self.warnings += 1
                if state == "unset":
                    log.warning(
                        "the clock reads %.3f (%s), before %s: taken for a clock that was never set. Memories it "
                        "stamps do not decay, nothing is archived, and the first end_session under a set clock "
                        "brings their stamps to the present", reading, _iso(reading), _iso(PLAUSIBLE_SINCE))
                else:
                    assert newest is not None
                    log.warning(
                        "the clock reads %.3f (%s), %.1f days behind the newest time this store has seen, %.3f (%s): "
                        "memories stamped after the clock do not decay until it passes them, and end_session brings "
                        "stamps more than %.0f s ahead of it to the present unless most of the collection is ahead "
                        "(then the clock is taken for one set back, and nothing is archived)", reading, _iso(reading),
                        (newest - reading) / 86_400.0, newest, _iso(newest), FUTURE_TOLERANCE_S)
            self._warned = state
            if state != "unset" and (newest is None or reading > newest):
                self.newest = reading

    def hold(self, floor: float, reading: float) -> None:
        """Continue from ``floor`` (the store's newest time) instead of ``reading``, a clock the
        store judged set back: readings advance from ``floor`` at the clock's rate."""
        with self._lock:
            self._held = (floor, reading)
        log.warning("the clock reads %.3f (%s), %.1f days behind the newest time this store holds: taken for a clock "
                    "never set or set back at boot; times continue from the store's newest, %.3f (%s), until the "
                    "clock reaches it", reading, _iso(reading), (floor - reading) / 86_400.0, floor, _iso(floor))

    def effective(self, reading: float) -> float:
        """The time to use for ``reading``: itself; while held, the store's time continued; and
        never less than the last time given when the clock stepped back by at most STEP_BACK_S
        (read as it was, a record written after the step sorted before one written just before it
        and fell out of a ``since`` window opened before it)."""
        with self._lock:
            out = reading
            if self._held is not None:
                floor, start = self._held
                if reading >= floor:  # the clock reached the store's time: it was set
                    self._held = None
                else:
                    out = floor + max(0.0, reading - start)
            last = self._last
            if last is not None and last - STEP_BACK_S <= out < last:
                out = last
            self._last = out
            return out
