"""Counts that steer a plan, reused while the store is nearly the same.

Some counts only choose how to answer, never what the answer is: a word's document
frequency (its IDF weight, whether it is too common to rank), how many memories a
filter clause's leaf-index range holds (whether the filter is evaluated on that range or
checked on the best-ranked rows) and the share of best-ranked matches a request's
restrictions passed (how many to check first). Counting can cost more than the rest of a
recall (a word in 750,000 of 1,000,000 memories: 42 ms; a range over 90 % of them:
counting to the cap, 2 ms) and a control loop asks the same question every cycle, while a
change of 1 % of the store cannot move such a count far. So a count is reused until the store's newest id
or change sequence has moved by more than 1 % of its size; a store under 100 memories
recounts after any change.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

import apsw

from ..store.connection import one_row

__all__ = ["CountCache", "StoreStamp", "store_stamp"]

T = TypeVar("T")


@dataclass(frozen=True)
class StoreStamp:
    """Where a store stands: its file ("" in memory: never reused), newest id and newest change."""

    file: str
    max_id: int
    seq: int

    def near(self, other: StoreStamp) -> bool:
        slack = self.max_id // 100
        return (bool(self.file) and self.file == other.file and abs(self.max_id - other.max_id) <= slack
                and abs(self.seq - other.seq) <= slack)


def store_stamp(conn: apsw.Connection) -> StoreStamp:
    if not conn.filename:
        return StoreStamp("", 0, 0)  # in memory: two stores may look alike, so nothing is reused
    max_id, seq = one_row(
        conn, "SELECT (SELECT coalesce(max(id), 0) FROM memories), (SELECT coalesce(max(seq), 0) FROM change_log)"
    )
    return StoreStamp(conn.filename, int(max_id), int(seq))


class CountCache(Generic[T]):
    """Counts by key, each with the stamp it was taken at; the oldest go first beyond ``limit``."""

    def __init__(self, limit: int = 4096) -> None:
        self._counts: OrderedDict[tuple[str, Hashable], tuple[T, StoreStamp]] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()

    def get(self, stamp: StoreStamp, key: Hashable) -> T | None:
        """The count of ``key`` if one was taken while the store was nearly as it is now."""
        with self._lock:
            found = self._counts.get((stamp.file, key))
        if found is None or not stamp.near(found[1]):
            return None
        return found[0]

    def put(self, stamp: StoreStamp, key: Hashable, count: T) -> None:
        if not stamp.file:
            return
        with self._lock:
            self._counts[(stamp.file, key)] = (count, stamp)
            self._counts.move_to_end((stamp.file, key))
            while len(self._counts) > self._limit:
                self._counts.popitem(last=False)
