"""Which message time to believe: the header stamp, or the log / receive time (docs/replay.md, "Recorded time").

A message's time is its header stamp, but a stamp is only as good as the clock that set
it. The log time (replay) or receive time (live bridge, ``RosMessage.arrived_ns``) is the
recorder's own clock. A stamp within ``OUTLIER_S`` of its log time is believed. A stamp
further from it is believed only when the topic's stamps keep that offset (stamp - log
time): when it is within ``OUTLIER_S`` of the topic's running offset, the median of its
last ``WINDOW`` offsets, and within ``max_episode_s`` of the log time. Otherwise the
message is placed at its log time, counted per topic as ``stamps_replaced``:

* a clock that was never set, a simulator's sim time in a wall-clock log (further than
  ``max_episode_s``: never believed);
* one message stamped 20 s ahead or 25 min stale among stamps near their log times.
  Believed, it made a 30 s or a 1503.9 s trajectory chunk, and as an episode's first
  message it moved the episode's start.

A topic's first message has no running offset to agree with. When it is further than
``OUTLIER_S`` from its log time it waits for the topic's next message (``admit`` returns
it with that one): believed when the next one keeps its offset (a topic whose stamps all
run, say, 2 min off the recorder's clock), placed at its log time when not (one message
stamped 20 s ahead). A first message nothing follows is placed at its log time when the
pipeline closes, or when ``OUTLIER_S`` has passed (``release``). The median follows a
lasting change of offset, and a single outlier never moves it.
Both the replay and the live bridge apply this one rule, in
:class:`~bridges.pipeline.pipeline.Pipeline` (the live bridge's receive time is already
translated onto the stamps' clock, so its offsets sit near 0).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Sequence

from .messages import RosMessage

__all__ = ["OUTLIER_S", "WINDOW", "StampCheck", "running_offset"]

#: a stamp this close to its log time, or to the topic's running offset, is believed. Real streams
#: stay well inside it (amcl's poses, stamped with the scan they used, lag by up to 5 s); a stamp
#: further off, believed, would stretch a trajectory chunk (chunk_seconds, 10 s) by as much
OUTLIER_S = 10.0
#: the running offset is the median of this many of the topic's last offsets (odd: a true median)
WINDOW = 5


def running_offset(window: Sequence[int], in_use: int) -> int:
    """The running offset over ``window`` (a stream's last ``WINDOW`` offsets): their median. With
    an even count (the window still filling) ``in_use``, the running offset so far, votes too, so
    a tie keeps it: a single outlier never moves it, a lasting change wins once it is the majority.
    The stamp check and the live bridge's clock (rosbridge/convert.py) both follow offsets by it."""
    votes = sorted(window) if len(window) % 2 else sorted([*window, in_use])
    return votes[len(votes) // 2]


class StampCheck:
    """One topic's stamps against its log times (see the module docstring)."""

    def __init__(self, limit_s: float, outlier_s: float = OUTLIER_S) -> None:
        self._limit_ns = int(limit_s * 1e9)
        self._outlier_ns = int(outlier_s * 1e9)
        self._offsets: deque[int] = deque(maxlen=WINDOW)
        #: running_offset of ``_offsets`` (None: no offset yet)
        self._running: int | None = None
        #: the topic's first message, far from its log time, waiting for the next one
        self.held: RosMessage | None = None
        #: messages placed at their log time
        self.replaced = 0

    def admit(self, msg: RosMessage) -> list[RosMessage]:
        """The messages to handle now, in order, each at the time to believe: none (``msg`` is
        held), ``msg``, or the held first message then ``msg``.

        A message without a log time (``arrived_ns`` None: a caller feeding the pipeline
        directly) is taken as it is."""
        arrived = msg.arrived_ns
        if arrived is None:
            return [msg]
        offset = msg.t_ns - arrived
        if self._limit_ns and abs(offset) > self._limit_ns:
            believed = False
        elif abs(offset) <= self._outlier_ns:
            believed = True
        elif not self._offsets and self.held is None:
            self.held = msg
            return []
        else:  # far from the log time: believed when the topic's stamps keep that offset
            running = self._offset(self.held) if self._running is None else self._running
            believed = abs(offset - running) <= self._outlier_ns
        admitted = self._judge_held(offset) if self.held is not None else []
        self._observe(offset)  # outliers too: a lasting change of offset wins the median
        return [*admitted, msg if believed else self._at_log_time(msg)]

    def release(self) -> list[RosMessage]:
        """The held first message at its log time (no next message came to vouch for its stamp)."""
        held, self.held = self.held, None
        if held is None:
            return []
        self._observe(self._offset(held))
        return [self._at_log_time(held)]

    def overdue(self, now_ns: int) -> list[RosMessage]:
        """The held first message at its log time once ``OUTLIER_S`` has passed without a next one
        (the live bridge's tick: a topic that published once must not hold its message for ever)."""
        held = self.held
        if held is None or now_ns - self._log_time(held) <= self._outlier_ns:
            return []
        return self.release()

    def _judge_held(self, next_offset: int) -> list[RosMessage]:
        held, self.held = self.held, None
        assert held is not None
        offset = self._offset(held)
        self._observe(offset)
        return [held if abs(next_offset - offset) <= self._outlier_ns else self._at_log_time(held)]

    def _observe(self, offset: int) -> None:
        self._offsets.append(offset)
        self._running = running_offset(self._offsets, offset if self._running is None else self._running)

    def _at_log_time(self, msg: RosMessage) -> RosMessage:
        self.replaced += 1
        return dataclasses.replace(msg, t_ns=self._log_time(msg))

    @staticmethod
    def _log_time(msg: RosMessage) -> int:
        assert msg.arrived_ns is not None
        return msg.arrived_ns

    def _offset(self, msg: RosMessage | None) -> int:
        assert msg is not None
        return msg.t_ns - self._log_time(msg)
