"""The bounded hand-over between roslibpy's thread and the bridge's writer thread.

roslibpy calls our subscriber callbacks on its own event-loop thread; anything slow
there stalls the websocket. So the callback only stamps the message and puts it here,
and one writer thread drains it. The inbox never grows past ``capacity`` messages nor
``max_bytes`` (each message's :func:`~bridges.pipeline.sizes.approx_bytes`): when the
writer falls behind, new messages are refused and counted per topic, so memory stays
flat and the loss is visible in the status line instead of silent. A count alone did not
bound memory: 20,000 camera frames of 4 MiB (5.6 MB of base64 each) are 112 GB.

The bytes of a message stay counted after the writer took it, until it says it is
:meth:`~BoundedInbox.done` with it: a writer stuck in a slow store write holds its whole
batch, and those frames are in memory as much as the queued ones.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any

__all__ = ["BoundedInbox", "Received"]


@dataclass(frozen=True)
class Received:
    """A message as it arrived: still the raw rosbridge JSON, plus when it came (both clocks)."""

    topic: str
    #: the type the subscription asked for, as the server spells it
    msgtype: str
    raw: Any
    #: wall-clock receive time (epoch ns): the message time when the header has no stamp
    receive_ns: int
    #: monotonic receive time (ns): for lag measurement, immune to clock steps
    receive_mono_ns: int
    #: what ``raw`` holds in memory, roughly (bridges.pipeline.sizes.approx_bytes)
    nbytes: int = 0


class BoundedInbox:
    """A thread-safe FIFO of :class:`Received` with a hard capacity (messages and bytes) and
    per-topic drop counters."""

    def __init__(self, capacity: int, max_bytes: int | None = None) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        if max_bytes is not None and max_bytes < 1:
            raise ValueError("max_bytes must be at least 1")
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._items: deque[Received] = deque()
        #: bytes of the queued messages and of those taken but not yet done
        self._bytes = 0
        self._peak_bytes = 0
        self._cond = threading.Condition()
        self._accepted: Counter[str] = Counter()
        self._dropped: Counter[str] = Counter()
        self._peak = 0
        self._closed = False

    def put(self, item: Received, *, always: bool = False) -> bool:
        """Queue ``item``; False (and counted as a drop) when full or closed. Never blocks.

        ``always``: past both bounds (not past close): an episode marker, a few bytes, whose loss
        would merge two episodes or leave one open."""
        with self._cond:
            if self._closed or not (always or self._fits(item)):
                self._dropped[item.topic] += 1
                return False
            self._items.append(item)
            self._bytes += item.nbytes
            self._accepted[item.topic] += 1
            self._peak = max(self._peak, len(self._items))
            self._peak_bytes = max(self._peak_bytes, self._bytes)
            self._cond.notify_all()
            return True

    def _fits(self, item: Received) -> bool:
        if len(self._items) >= self.capacity:
            return False
        # A message larger than the bound on its own is taken when nothing else is held: refused,
        # every message of that topic would be lost for good (a 300 MB point cloud under 256 MB),
        # and memory is still bounded, by the larger of the bound and one message.
        return self.max_bytes is None or self._bytes == 0 or self._bytes + item.nbytes <= self.max_bytes

    def done(self, item: Received) -> None:
        """The writer has finished with a taken ``item``: its bytes no longer count."""
        with self._cond:
            self._bytes -= item.nbytes

    def take(self, max_items: int, timeout: float) -> list[Received]:
        """Up to ``max_items`` oldest items; waits up to ``timeout`` s for the first one."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._items:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                self._cond.wait(remaining)
            count = min(max_items, len(self._items))
            return [self._items.popleft() for _ in range(count)]

    def close(self) -> None:
        """Refuse further items (they count as drops); what is queued can still be taken."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)

    @property
    def peak(self) -> int:
        with self._cond:
            return self._peak

    @property
    def held_bytes(self) -> int:
        """Bytes of the queued messages and of those the writer is still working on."""
        with self._cond:
            return self._bytes

    @property
    def peak_bytes(self) -> int:
        with self._cond:
            return self._peak_bytes

    def accepted(self) -> dict[str, int]:
        with self._cond:
            return dict(self._accepted)

    def dropped(self) -> dict[str, int]:
        with self._cond:
            return dict(self._dropped)
