"""The service's watch over its clock: a reading that cannot be right is reported once.

A robot's clock is wrong in two ways that matter to decay (docs/consolidation.md, "Clocks"):
never set (an RTC lost at boot reads 1970), or set back behind the times the store already
holds (a reset to a firmware date, or NTP correcting a clock that ran ahead). Readings are
used as they are -- a clock behind the stamps makes memories look younger, never older, and
reinforcement never moves ``reinforced_at`` back -- but the first such reading of a run of
them is logged with the numbers, so a fleet's operator sees which robot's clock is off.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timezone

from .decay import FUTURE_TOLERANCE_S, PLAUSIBLE_SINCE

__all__ = ["ClockWatch"]

log = logging.getLogger("robotmem")


def _iso(seconds: float) -> str:
    try:
        return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return f"{seconds:.3f}"


class ClockWatch:
    """Tracks the newest time seen (the store's newest stamp at open, then each reading) and
    warns once per run of readings that are unset (before PLAUSIBLE_SINCE) or more than
    FUTURE_TOLERANCE_S behind that time. Deterministic, O(1) per reading."""

    def __init__(self, store_newest: float | None) -> None:
        self.newest = store_newest
        self.warnings = 0
        self._warned: str | None = None
        self._lock = threading.Lock()

    def check(self, reading: float) -> None:
        with self._lock:
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
