"""An in-process numpy mirror of one collection's vectors, for exact KNN.

SQLite holds the truth (``embeddings``); this mirror exists because a brute-force
matrix product over 100,000 x 384 float32 rows takes about 8 ms in numpy while a
sqlite-vec full scan takes about 50 ms. It stays exact and current by replaying
``change_log`` (filled by triggers) before every search, so writes from other
processes and threads are seen on the next recall. A mirror that fell behind the rows
pruned from it (robotmem.store.change_log) loads afresh; an overlay, which cannot,
raises :class:`ChangesPruned` for its snapshot to be given up.

Per row it also keeps what recall's cheap filters need (status, confidence, times),
so the common case (no context filter) never touches SQL on the vector side.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Sequence
from typing import Any, cast

import apsw
import numpy as np

from ..store.change_log import newest_seq, missed
from ..store.connection import scalar
from ..store.decay import NUMPY_OPS
from .eligibility import Eligibility, eligible

__all__ = ["ChangesPruned", "Eligibility", "VectorIndex", "cosines"]

_GROW = 1.5
_FETCH_CHUNK = 5000


def cosines(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``matrix @ query`` on this thread alone, without BLAS.

    OpenBLAS runs a matrix-vector product of a few thousand rows on all its threads, and its
    workers then spin for about a tenth of a second: a control loop recalling every 50 ms
    from a store with 2,000 such rows kept a whole core busy between its calls, and the spin
    took the second core from recall's own index probe (plain recall at 1,000,000 with a
    5,000-row overlay: 17.9 ms against 15.5 ms with BLAS held to one thread). numpy's einsum
    loop takes 2.6 ms for 20,000 x 384 (BLAS on two cores: 1.4 ms), and recall scans at most
    about that many rows here (MIN_ROWS, STALE_ROWS) before the index takes over.
    """
    return cast(np.ndarray, np.einsum("ij,j->i", matrix, query))


#: A dict entry of int to int, with its two ints (measured: 100-110 bytes).
_ROW_OF_BYTES = 100


class ChangesPruned(Exception):
    """Rows an overlay needed were pruned from ``change_log``: its snapshot cannot be kept exact."""


class VectorIndex:
    """Vectors of one (collection, model) pair plus per-row recall metadata."""

    def __init__(self, collection: str, model_id: str, dim: int, *, facts_only: bool = False) -> None:
        """``facts_only``: mirror only the vectors of facts (consolidation's candidate search,
        which never compares perceptions), so its size follows the facts, not every memory."""
        self.collection = collection
        self.model_id = model_id
        self.dim = dim
        self._kind = " AND m.type = 'fact'" if facts_only else ""
        self._lock = threading.Lock()
        self._last_seq = -1
        self._size = 0
        self._ids = np.zeros(0, dtype=np.int64)
        self._matrix = np.zeros((0, dim), dtype=np.float32)
        self._live = np.zeros(0, dtype=bool)
        self._archived = np.zeros(0, dtype=bool)
        self._conf0 = np.zeros(0)
        self._reinforced = np.zeros(0)
        self._occurred = np.zeros(0)
        self._protected = np.zeros(0, dtype=bool)
        self._row_of: dict[int, int] = {}
        self._order: np.ndarray | None = None  # argsort of ids, rebuilt after rows are added
        self._overlay = False  # only the rows changed after a snapshot: it cannot load afresh
        #: change_log entries applied since the mirror started (an index snapshot's overlay: its staleness)
        self.changes_seen = 0

    @classmethod
    def changes_after(cls, seq: int, collection: str, model_id: str, dim: int) -> "VectorIndex":
        """A mirror of only the rows changed after ``seq`` (the overlay of a persisted index snapshot)."""
        index = cls(collection, model_id, dim)
        index._last_seq = seq
        index._overlay = True
        return index

    def covers(self, memory_ids: np.ndarray) -> np.ndarray:
        """Which of the ids this mirror holds (current or removed): their snapshot entries are out of date."""
        with self._lock:
            return np.fromiter((int(m) in self._row_of for m in memory_ids), dtype=bool, count=len(memory_ids))

    @property
    def loaded(self) -> bool:
        return self._last_seq >= 0

    def __len__(self) -> int:
        return int(self._live[: self._size].sum())

    @property
    def resident_bytes(self) -> int:
        """About what the mirror holds: its arrays, and its id look-up (about 100 bytes a row)."""
        arrays = (self._ids, self._matrix, self._live, self._archived, self._reinforced, self._occurred,
                  self._protected)
        return sum(a.nbytes for a in arrays) + _ROW_OF_BYTES * len(self._row_of)

    # -- keeping current -------------------------------------------------------------

    def sync(self, conn: apsw.Connection) -> None:
        with self._lock:
            if self._last_seq < 0:
                self._full_load(conn)
                return
            rows = conn.execute(
                "SELECT seq, memory_id FROM change_log WHERE seq > ? AND collection = ?",
                (self._last_seq, self.collection),
            ).fetchall()
            if missed(conn, self.collection, self._last_seq):
                if self._overlay:
                    raise ChangesPruned(f"changes of {self.collection!r} after {self._last_seq} were pruned")
                self._full_load(conn)
                return
            if not rows:
                return
            self.changes_seen += len(rows)
            self._last_seq = max(cast(int, seq) for seq, _ in rows)
            self._refresh(conn, sorted({cast(int, memory_id) for _, memory_id in rows}))

    def _full_load(self, conn: apsw.Connection) -> None:
        """Every row, read a chunk at a time into arrays sized once: the rows read whole as Python
        tuples, and their vectors joined into one bytes object, took twice the float32 matrix again
        on top of it (a million rows: 4.7 GB at the peak for a 1.5 GB mirror, docs/benchmarks.md)."""
        self._last_seq = newest_seq(conn)
        self._size = 0
        self._row_of = {}
        where = " WHERE e.collection = ? AND e.model_id = ?" + self._kind
        self._reserve(int(scalar(conn, "SELECT count(*) FROM embeddings e JOIN memories m ON m.id = e.memory_id"
                                 + where, (self.collection, self.model_id))))
        rows = conn.execute(_SELECT_ROWS + where + " ORDER BY e.memory_id", (self.collection, self.model_id))
        while chunk := list(itertools.islice(rows, _FETCH_CHUNK)):
            self._apply(chunk, removed=())

    def _refresh(self, conn: apsw.Connection, memory_ids: Sequence[int]) -> None:
        found: list[tuple[Any, ...]] = []
        for start in range(0, len(memory_ids), _FETCH_CHUNK):
            chunk = memory_ids[start : start + _FETCH_CHUNK]
            found.extend(
                conn.execute(
                    _SELECT_ROWS + " WHERE e.model_id = ? AND e.memory_id IN (SELECT value FROM json_each(?))"
                    + self._kind,
                    (self.model_id, "[" + ",".join(map(str, chunk)) + "]"),
                )
            )
        present = {row[0] for row in found}
        self._apply(found, removed=[m for m in memory_ids if m not in present])

    def _apply(self, rows: list[tuple[Any, ...]], removed: Iterable[int]) -> None:
        for memory_id in removed:
            row = self._row_of.get(memory_id)
            if row is not None:
                self._live[row] = False
        rows = [r for r in rows if len(r[1]) == 4 * self.dim]
        if not rows:
            return
        new = [r for r in rows if r[0] not in self._row_of]
        if new:
            self._order = None
        self._reserve(self._size + len(new))
        for r in new:
            self._row_of[r[0]] = self._size
            self._ids[self._size] = r[0]
            self._size += 1
        targets = np.fromiter((self._row_of[r[0]] for r in rows), dtype=np.int64, count=len(rows))
        self._matrix[targets] = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(-1, self.dim)
        status = [r[2] for r in rows]
        self._live[targets] = [s in ("active", "archived") for s in status]
        self._archived[targets] = [s == "archived" for s in status]
        self._conf0[targets] = [r[3] for r in rows]
        self._reinforced[targets] = [r[4] for r in rows]
        self._occurred[targets] = [r[5] for r in rows]
        self._protected[targets] = [bool(r[6]) for r in rows]

    def _reserve(self, needed: int) -> None:
        capacity = len(self._ids)
        if needed <= capacity:
            return
        new_cap = needed if capacity == 0 else max(needed, int(capacity * _GROW) + 1024)

        def grow(a: np.ndarray) -> np.ndarray:
            out = np.zeros((new_cap,) + a.shape[1:], dtype=a.dtype)
            out[: self._size] = a[: self._size]
            return out

        self._ids, self._matrix, self._live, self._archived = (
            grow(self._ids), grow(self._matrix), grow(self._live), grow(self._archived)
        )
        self._conf0, self._reinforced, self._occurred, self._protected = (
            grow(self._conf0), grow(self._reinforced), grow(self._occurred), grow(self._protected)
        )

    # -- searching -------------------------------------------------------------------

    def score_all(self, query: np.ndarray) -> np.ndarray:
        """Cosine of the query with every row (one matrix-vector product), to reuse across searches."""
        with self._lock:
            return cosines(self._matrix[: self._size], query)

    def near_any(self, queries: np.ndarray, memory_ids: np.ndarray, threshold: float) -> np.ndarray:
        """The ids among ``memory_ids`` whose vector has a cosine of at least ``threshold`` with any
        of ``queries`` (rows of unit vectors), exact. Many queries at once: one matrix product per
        chunk of rows, so the rows are gathered once however many queries there are."""
        if len(queries) == 0 or len(memory_ids) == 0:
            return np.zeros(0, dtype=np.int64)
        with self._lock:
            if self._size == 0:
                return np.zeros(0, dtype=np.int64)
            rows = self._rows_of(np.asarray(memory_ids, dtype=np.int64))
            found: list[np.ndarray] = []
            for start in range(0, len(rows), _FETCH_CHUNK * 4):
                chunk = rows[start : start + _FETCH_CHUNK * 4]
                scores = queries.astype(np.float32, copy=False) @ self._matrix[chunk].T
                found.append(self._ids[chunk[(scores >= threshold).any(axis=0)]])
            return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)

    def search(
        self,
        query: np.ndarray,
        k: int,
        rules: Eligibility,
        *,
        candidates: np.ndarray | None = None,
        min_similarity: float = -1.0,
        all_scores: np.ndarray | None = None,
    ) -> list[tuple[int, float]]:
        """Top-k (memory_id, cosine) among eligible rows (and ``candidates`` when given), best first.

        ``all_scores`` (from :meth:`score_all`, same query) saves recomputing the product.
        """
        with self._lock:
            size = self._size
            if size == 0:
                return []
            if all_scores is not None and len(all_scores) != size:
                all_scores = None  # rows arrived in between
            if candidates is not None:
                rows = self._rows_of(candidates)
                if all_scores is not None:
                    scores = all_scores[rows]
                elif len(rows) * 4 < size:
                    scores = cosines(self._matrix[rows], query)
                else:
                    scores = cosines(self._matrix[:size], query)[rows]
            else:
                rows = None
                scores = all_scores if all_scores is not None else cosines(self._matrix[:size], query)
            if len(scores) == 0:
                return []
            # Most rows are eligible: check eligibility on a short list first, all rows only if it runs dry.
            shortlist = min(len(scores), 4 * k + 16)
            top = np.argpartition(-scores, shortlist - 1)[:shortlist] if shortlist < len(scores) else np.arange(len(scores))
            hits = self._eligible_top(top, rows, scores, k, rules, min_similarity)
            # Rows outside the shortlist score lower; they matter only if they can still pass.
            may_have_more = shortlist < len(scores) and float(scores[top].min()) >= min_similarity
            if len(hits) < k and may_have_more:
                hits = self._eligible_top(np.arange(len(scores)), rows, scores, k, rules, min_similarity)
            return hits

    def _rows_of(self, memory_ids: np.ndarray) -> np.ndarray:
        """Mirror rows of the given memory ids (ids without a vector are skipped), vectorised."""
        size = self._size
        if self._order is None:
            self._order = np.argsort(self._ids[:size], kind="stable")
        sorted_ids = self._ids[:size][self._order]
        pos = np.searchsorted(sorted_ids, memory_ids)
        pos = np.minimum(pos, size - 1)
        found = sorted_ids[pos] == memory_ids
        return np.asarray(self._order[pos[found]], dtype=np.int64)

    def _eligible_top(
        self, positions: np.ndarray, rows: np.ndarray | None, scores: np.ndarray, k: int, rules: Eligibility,
        min_similarity: float,
    ) -> list[tuple[int, float]]:
        """Best k among ``positions`` (indexes into ``scores``) that pass the eligibility rules."""
        index_rows = positions if rows is None else rows[positions]
        picked = scores[positions]
        keep = self._eligible(index_rows, rules) & (picked >= min_similarity)
        index_rows, picked = index_rows[keep], picked[keep]
        if len(picked) > k:
            best = np.argpartition(-picked, k - 1)[:k]
            index_rows, picked = index_rows[best], picked[best]
        order = np.argsort(-picked, kind="stable")
        return [(int(self._ids[r]), float(s)) for r, s in zip(index_rows[order], picked[order])]

    def _eligible(self, rows: np.ndarray, rules: Eligibility) -> np.ndarray:
        return np.asarray(eligible(rules, _Fields(self, rows), NUMPY_OPS))


class _Fields:
    """The mirror's copy of the rows the rules read, gathered only when a rule asks for them."""

    def __init__(self, index: VectorIndex, rows: np.ndarray) -> None:
        self._index = index
        self._rows = rows

    @property
    def searchable(self) -> np.ndarray:
        return np.asarray(self._index._live[self._rows])

    @property
    def active(self) -> np.ndarray:
        return np.asarray(self._index._live[self._rows] & ~self._index._archived[self._rows])

    @property
    def confidence(self) -> np.ndarray:
        return np.asarray(self._index._conf0[self._rows])

    @property
    def reinforced_at(self) -> np.ndarray:
        return np.asarray(self._index._reinforced[self._rows])

    @property
    def protected(self) -> np.ndarray:
        return np.asarray(self._index._protected[self._rows])

    @property
    def occurred_at(self) -> np.ndarray:
        return np.asarray(self._index._occurred[self._rows])


_SELECT_ROWS = (
    "SELECT e.memory_id, e.vector, m.status, m.confidence, m.reinforced_at, m.occurred_at, m.protected "
    "FROM embeddings e JOIN memories m ON m.id = e.memory_id"
)
