"""In-process copies of context leaf columns: (collection, leaf path) -> value code per memory id.

Outcome statistics count the group field, ``task.success`` and ``episode.outcome`` of every
memory of a set. Read from ``context_leaves`` that is a walk of 100,000 leaf rows per path
per request (tens of milliseconds at 100,000 memories); a control loop asks the same
question every cycle. A column here is an int32 array indexed by memory id (-1: no leaf at
the path) into a table of the distinct (kind, value) leaves, so counting a set is fancy
indexing and bincount. Memory: 4 bytes per memory id per path (4 MB per path at 1,000,000
memories) plus the distinct values; at most ``MAX_COLUMNS`` columns are kept.

It stays exact as the vector mirror (robotmem.search.vector_index) does: before every use it
replays ``change_log`` (status, context, collection changes and deletes, logged by triggers)
and reads the memories above the newest id it saw (new ones), so writes of other processes
are seen by the next request; a column that fell behind the rows pruned from the log
(robotmem.store.change_log) loads afresh. A request whose read snapshot is older than a column is not
answered from it (the caller falls back to the leaf index).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

import apsw
import numpy as np

from ..store.change_log import missed
from ..store.connection import one_row
from ..store.leaves import leaves_at_path_sql

__all__ = ["LeafColumn", "LeafColumns", "MAX_COLUMNS"]

MAX_COLUMNS = 8
#: More changed memories than this since the last request: reload the column instead.
_RELOAD_CHANGES = 20_000
_GROW = 1.5


class LeafColumn:
    """One (collection, path): ``codes[id]`` indexes ``atoms`` ((kind, value) pairs), -1 for no leaf."""

    def __init__(self, collection: str, path: str) -> None:
        self.collection, self.path = collection, path
        self.codes = np.full(0, -1, dtype=np.int32)
        self.atoms: list[tuple[str, Any]] = []
        self._code_of: dict[tuple[str, Any], int] = {}
        self.last_seq = -1
        self.max_id = -1
        self._derived: dict[str, np.ndarray] = {}
        #: distinct leaves at the last load: a table grown well past it is rebuilt (old values pile up)
        self._live_atoms = 0

    # -- keeping current ---------------------------------------------------------------

    def sync(self, conn: apsw.Connection, seq: int, max_id: int) -> None:
        """Bring the column to the snapshot ``conn`` reads (its newest change ``seq``, newest id ``max_id``)."""
        if self.last_seq < 0 or len(self.atoms) > max(4096, 4 * self._live_atoms):
            self._load(conn, seq, max_id)
            return
        if seq == self.last_seq and max_id == self.max_id:
            return
        changed = one_row(conn, "SELECT count(*), group_concat(memory_id) FROM change_log WHERE seq > ? "
                          "AND collection = ?", [self.last_seq, self.collection])
        if (int(changed[0]) > _RELOAD_CHANGES or max_id - self.max_id > _RELOAD_CHANGES
                or missed(conn, self.collection, self.last_seq)):
            self._load(conn, seq, max_id)
            return
        ids = np.unique(np.fromstring(changed[1] or "", dtype=np.int64, sep=","))
        self._reserve(max_id + 1)
        self.codes[ids] = -1
        # An IN list found by primary key; the + keeps SQLite off the collection index (a walk of it).
        where = ("m.id IN (SELECT id FROM memories WHERE id > ? UNION ALL SELECT value FROM json_each(?)) "
                 "AND +m.collection = ?")
        self._put(conn.execute(leaves_at_path_sql(where),
                               [self.max_id, json.dumps(ids.tolist()), self.collection, self.path]))
        self.last_seq, self.max_id = seq, max_id

    def _load(self, conn: apsw.Connection, seq: int, max_id: int) -> None:
        self.codes = np.full(max_id + 1, -1, dtype=np.int32)
        self.atoms, self._code_of = [], {}
        # By epoch and value: the rows arrive in index order, one group_concat per distinct leaf of an epoch.
        for value, kind, text in conn.execute(
                "SELECT value, kind, group_concat(memory_id) FROM context_leaves WHERE collection = ? AND path = ? "
                "GROUP BY epoch, value, kind", [self.collection, self.path]):
            ids = np.fromstring(text, dtype=np.int64, sep=",")
            self.codes[ids] = self._code(str(kind), value)
        self._live_atoms = len(self.atoms)
        self.last_seq, self.max_id = seq, max_id

    def _put(self, rows: Any) -> None:
        for memory_id, kind, value in rows:
            self.codes[memory_id] = self._code(str(kind), value)

    def _code(self, kind: str, value: Any) -> int:
        key = (kind, value)
        code = self._code_of.get(key)
        if code is None:
            code = self._code_of[key] = len(self.atoms)
            self.atoms.append(key)
            self._derived.clear()
        return code

    def _reserve(self, size: int) -> None:
        if size > len(self.codes):
            grown = np.full(max(size, int(len(self.codes) * _GROW)), -1, dtype=np.int32)
            grown[: len(self.codes)] = self.codes
            self.codes = grown

    # -- reading -----------------------------------------------------------------------

    def at(self, ids: np.ndarray) -> np.ndarray:
        """Codes of ``ids`` (any id the column has not seen has no leaf)."""
        inside = ids < len(self.codes)
        out = np.full(len(ids), -1, dtype=np.int32)
        out[inside] = self.codes[ids[inside]]
        return out

    def per_atom(self, name: str, of: Any, dtype: Any) -> np.ndarray:
        """``of(kind, value)`` for every atom, with one extra entry (index -1) for no leaf: ``of(None, None)``."""
        table = self._derived.get(name)
        if table is None:
            table = self._derived[name] = np.array([of(k, v) for k, v in self.atoms] + [of(None, None)], dtype=dtype)
        return table


class LeafColumns:
    """The columns of one store, for one process (one per Memory instance), least recently used first out."""

    def __init__(self, max_columns: int = MAX_COLUMNS) -> None:
        self._columns: OrderedDict[tuple[str, str], LeafColumn] = OrderedDict()
        self._max = max_columns
        self._lock = threading.Lock()

    def lock(self) -> threading.Lock:
        """Held while columns are synced and read: one request at a time uses them."""
        return self._lock

    def get(self, conn: apsw.Connection, collection: str, paths: list[str]) -> list[LeafColumn] | None:
        """The columns of ``paths``, current for the snapshot ``conn`` reads; None when a column is newer
        than that snapshot (a reader that began before another request synced). Call with the lock held."""
        seq, max_id = one_row(conn, "SELECT (SELECT coalesce(max(seq), 0) FROM change_log), "
                              "(SELECT coalesce(max(id), 0) FROM memories)")
        out = []
        for path in paths:
            key = (collection, path)
            column = self._columns.get(key)
            if column is None:
                column = self._columns[key] = LeafColumn(collection, path)
                while len(self._columns) > self._max:
                    self._columns.popitem(last=False)
            self._columns.move_to_end(key)
            if column.last_seq > int(seq) or column.max_id > int(max_id):
                return None
            column.sync(conn, int(seq), int(max_id))
            out.append(column)
        return out
