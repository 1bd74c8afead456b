"""Gaps: stretches of an episode without data (a lost connection, a topic that went quiet).

A message gap is a pause on one topic longer than ``gap_periods`` times the topic's usual
period and at least ``gap_min_s``; the usual period is a running average of the pauses
that were not gaps, so a 1 kHz joint stream and a 1 Hz camera are judged each by its own
rate. A disconnection (the live bridge) is a gap of every topic. Gaps are recorded in the
episode summary and in the chunks they fall in (``gaps: [{start, end, reason}]``, times in
epoch seconds of the message clock), and a path never counts the jump across one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Gap", "GapDetector", "gaps_overlapping", "step_crosses_gap"]

#: weight of the newest pause in the running average period
_SMOOTHING = 0.1


@dataclass(frozen=True)
class Gap:
    start_ns: int
    end_ns: int
    reason: str
    #: the topic that went quiet (None: every topic, e.g. a disconnection)
    topic: str | None = None

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9

    def as_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"start": self.start_ns / 1e9, "end": self.end_ns / 1e9, "reason": self.reason,
                                 "duration_s": round(self.seconds, 3)}
        if self.topic is not None:
            entry["topic"] = self.topic
        return entry


class GapDetector:
    """Watches one topic's message times; ``observe`` returns the gap a message ends, if any."""

    def __init__(self, topic: str, min_s: float, periods: float) -> None:
        self.topic = topic
        self.min_ns = int(min_s * 1e9)
        self.periods = periods
        self._last_ns: int | None = None
        self._period_ns = 0.0

    def observe(self, t_ns: int) -> Gap | None:
        last, self._last_ns = self._last_ns, t_ns if self._last_ns is None else max(self._last_ns, t_ns)
        if last is None or t_ns <= last:
            return None
        pause = t_ns - last
        if self._period_ns and pause > max(self.min_ns, self.periods * self._period_ns):
            expected = f"about every {self._period_ns / 1e9:.3g} s"
            return Gap(last, t_ns, f"no messages for {pause / 1e9:.1f} s ({expected})", self.topic)
        self._period_ns = pause if not self._period_ns else (1 - _SMOOTHING) * self._period_ns + _SMOOTHING * pause
        return None

    def reset(self) -> None:
        """A new episode: the last message of the previous one does not start a gap."""
        self._last_ns = None


def gaps_overlapping(gaps: list[Gap], start_ns: int, end_ns: int) -> list[Gap]:
    """The gaps that share time with [start_ns, end_ns]."""
    return [g for g in gaps if g.start_ns <= end_ns and g.end_ns >= start_ns]


def step_crosses_gap(gaps: list[Gap], prev_ns: int, t_ns: int) -> bool:
    """Whether the step between two consecutive messages spans a gap (it is not travelled path)."""
    return any(prev_ns < g.end_ns and t_ns > g.start_ns for g in gaps)
