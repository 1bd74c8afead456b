"""The vector side of recall: which of three exact-at-the-edges paths answers a request.

* A persisted, memory-mapped IVF snapshot (robotmem.search.ann_index) when the
  collection has one (``robotmem reindex`` writes it for collections of at least
  ``ann_index.MIN_ROWS`` vectors): a bounded search whatever the size.
* The in-process numpy mirror (robotmem.search.vector_index) otherwise: an exact
  scan, the fastest answer for small collections.
* Exact cosine in SQLite (sqlite-vec) over the rows a filter leaves, when the filter
  is selective (its leaf-index candidate set is small, robotmem.search.filter_index)
  or when the index cannot find enough rows that pass it: so a filter leaving 30 rows
  returns those 30, ranked by exact cosine.
"""

from __future__ import annotations

import json
import logging
import subprocess
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import apsw
import numpy as np

from ..store.connection import Database
from ..store.counts import collection_size
from ..store.forks import in_child_after_fork
from ..store.leaves import epoch_list
from . import ann_index, rebuild_process, sql
from .ann_index import AnnIndex, newest_file
from .eligibility import Eligibility
from .filter_index import smallest
from .fulltext import eligible_subset
from .request import RecallRequest
from .vector_index import ChangesPruned, VectorIndex

__all__ = ["EarlyProbe", "LEAF_CANDIDATE_CAP", "SELECTIVE_SHARE", "VectorSearch", "filter_source"]

log = logging.getLogger(__name__)

#: A filter whose smallest leaf-index candidate set is at most this large is evaluated on that set.
LEAF_CANDIDATE_CAP = 10_000
#: ... and at most this share of the collection. Below it the filter's rows are few next to the rest:
#: a filter passing 90 % of a 10,000-memory store was read in full through the leaf index and ranked
#: by sqlite-vec (57 ms a recall), where checking it on the best-ranked rows took 6 ms. Both plans
#: are exact; at 1,000,000 memories the cap above decides.
SELECTIVE_SHARE = 0.1
#: A process starts a rebuild that failed again after this long (a full disk, a store being moved).
REBUILD_RETRY_S = 60.0
#: Below this many SQL candidates and with no warm in-process mirror, sqlite-vec ranks them in SQL.
_SQL_VECTOR_LIMIT = 2048


def filter_source(conn: apsw.Connection, req: RecallRequest) -> sql.Query | None:
    """The leaf-index query that drives a selective filter, or None (no filter, broad or unindexable)."""
    if req.filter is None or not req.filter.candidates:
        return None
    epochs = epoch_list(conn)
    best = smallest(conn, req.filter.candidates, req.collection, LEAF_CANDIDATE_CAP + 1, epochs)
    # The collection's size is read only for a set under the cap: a broad filter of a large store needs no more.
    if best is None or best[1] > LEAF_CANDIDATE_CAP:
        return None
    if best[1] > SELECTIVE_SHARE * collection_size(conn, req.collection):
        return None
    return best[0].query(req.collection, epochs)


@dataclass(frozen=True)
class _Build:
    """A rebuild this process started (``process`` None: it could not be started)."""

    process: subprocess.Popen[bytes] | None
    started: float

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def succeeded(self) -> bool:
        return self.process is not None and self.process.poll() == 0


@dataclass(frozen=True)
class EarlyProbe:
    """An index's first probe for one query, running on a worker thread (VectorSearch.probe_early)."""

    ann: AnnIndex
    k: int
    keys: Future[np.ndarray]


#: What the exact mirrors of one kind (recall's, consolidation's facts') may hold in all before the
#: least recently used are dropped (reloaded from the store when next used, about 40-90 ms for
#: 20,000 vectors). A server answering for many collections kept a mirror of each for good: a
#: collection below the snapshot's 20,000 vectors costs up to 36 MB, so a fleet of collections
#: grew the process by as many as it served. 192 MB keeps five such mirrors at 384 dimensions; the
#: mirror in use is never dropped, however large.
MIRROR_BYTES = 192 << 20


def _drop_least_recent(mirrors: dict[tuple[str, str], VectorIndex], limit: int) -> None:
    """Drop the least recently used mirrors (first in ``mirrors``) until they hold ``limit`` bytes
    or only the newest is left. A caller still holding a dropped one keeps using it."""
    held = sum(m.resident_bytes for m in mirrors.values())
    for key in list(mirrors)[:-1]:
        if held <= limit:
            break
        held -= mirrors.pop(key).resident_bytes


class VectorSearch:
    def __init__(self, folder: Path | None, *, half_life_s: float, min_similarity: float,
                 db: Database | None = None) -> None:
        self._folder = folder
        self._db = db  # whose stale snapshots a process of their own rebuilds
        self._builds: dict[tuple[str, str], _Build] = {}
        self._half_life_s = half_life_s
        self._min_similarity = min_similarity
        self._mirrors: dict[tuple[str, str], VectorIndex] = {}
        self._fact_mirrors: dict[tuple[str, str], VectorIndex] = {}
        self._anns: dict[tuple[str, str], AnnIndex] = {}
        #: Snapshots older than the change_log rows pruned since (robotmem.store.change_log): their
        #: overlay cannot be made exact, so recall scans exactly until a newer one is published.
        self._outrun: set[Path] = set()
        self._folder_seen: float | None = None
        self._lock = threading.Lock()
        self._prober: ThreadPoolExecutor | None = None
        in_child_after_fork(self._after_fork)

    def _after_fork(self) -> None:
        """In a forked child the prober's threads are gone while it counts them idle (a probe submitted
        there never ran, and recall waited for it for good), and the rebuilds are the parent's children."""
        self._lock = threading.Lock()
        self._prober = None
        self._builds = {}

    def mirror(self, collection: str, model_id: str, dim: int, *, facts_only: bool = False) -> VectorIndex:
        """The process's exact mirror of the collection's vectors of one model; ``facts_only``: of its
        facts alone (consolidation's candidate search; recall uses the other, or the ANN snapshot)."""
        mirrors = self._fact_mirrors if facts_only else self._mirrors
        key = (collection, model_id)
        with self._lock:
            # Put back last: a dict keeps its order, so the first mirror is the least recently used.
            index = mirrors.pop(key, None)
            if index is None:
                index = VectorIndex(collection, model_id, dim, facts_only=facts_only)
            mirrors[key] = index
            _drop_least_recent(mirrors, MIRROR_BYTES)
            return index

    def ann(self, collection: str, model_id: str, dim: int) -> AnnIndex | None:
        """The newest published snapshot for (collection, model), reopened when a newer one appears."""
        if self._folder is None:
            return None
        try:
            stamp = self._folder.stat().st_mtime
        except FileNotFoundError:
            return None
        key = (collection, model_id)
        with self._lock:
            current = self._anns.get(key)
            if current is not None and stamp == self._folder_seen:
                return current
            self._folder_seen = stamp
            found = newest_file(self._folder, collection, model_id)
            if found is not None and found[0] in self._outrun:
                return None
            if found is None or (current is not None and current.path == found[0]):
                return current
            try:
                self._anns[key] = AnnIndex(found[0], found[1], collection, model_id, dim)
            except (ValueError, RuntimeError, OSError) as exc:
                log.warning("vector index %s unusable (%s); recall scans exactly until `robotmem reindex`",
                            found[0].name, exc)
                return current
            self._mirrors.pop(key, None)  # its float32 copy (1.5 GB at a million) is not read again
            build = self._builds.get(key)
            if build is not None and not build.running():  # polled: a server runs for months, without zombies
                del self._builds[key]
            return self._anns[key]

    def _rebuild_soon(self, collection: str, model_id: str, dim: int, seq: int) -> None:
        """Write a new snapshot in place of the one taken at ``seq`` (0: none yet) in a detached process
        (robotmem.search.rebuild_process), unless a process is building it or the last one this
        process started failed less than ``REBUILD_RETRY_S`` ago (a control loop notices on every
        recall). Every process reopens the new file on its next recall."""
        if self._db is None or self._folder is None:
            return
        key = (collection, model_id)
        with self._lock:
            last = self._builds.get(key)
            if last is not None and (last.running() or (
                    not last.succeeded() and time.monotonic() - last.started < REBUILD_RETRY_S)):
                return
            try:
                process = rebuild_process.start(self._db.path, collection, model_id, dim, seq)
            except OSError as exc:  # no fork left, a read-only folder: recall stays exact on the overlay
                log.warning("cannot start rebuilding the vector index of %s (%s); `robotmem reindex` does it",
                            collection, exc)
                self._builds[key] = _Build(None, time.monotonic())
                return
            if process is not None:  # None: another process is building it
                self._builds[key] = _Build(process, time.monotonic())

    def join_builds(self) -> None:
        """Wait for the rebuilds this process started (tests, orderly shutdown) and let it start the next at once."""
        with self._lock:
            running = list(self._builds.values())
            self._builds.clear()
        for build in running:
            if build.process is not None:
                build.process.wait()

    def probe_early(self, req: RecallRequest, query: np.ndarray, model_id: str, k: int) -> EarlyProbe | None:
        """Start the index's first probe for ``hits(..., k)`` on a worker thread, so that it runs
        while this thread searches full text (both release the GIL: on two cores the probe, 4-5 ms
        at 1,000,000, then costs no wall time). None without an index (nothing to overlap)."""
        ann = self.ann(req.collection, model_id, int(query.shape[0]))
        if ann is None:
            return None
        with self._lock:
            if self._prober is None:
                self._prober = ThreadPoolExecutor(max_workers=2, thread_name_prefix="robotmem-probe")
            prober = self._prober
        return EarlyProbe(ann, k, prober.submit(ann.probe, query, *ann.first_probe(k)))

    def hits(
        self, conn: apsw.Connection, req: RecallRequest, now: float, query: np.ndarray, model_id: str, k: int,
        chosen: np.ndarray | None, filtered: list[np.ndarray], early: EarlyProbe | None = None,
    ) -> list[tuple[int, float]]:
        """Top-k (memory_id, cosine) among the rows the request leaves, best first.

        ``chosen`` is a selective filter's exact result (every eligible row, read through the
        leaf index: see :func:`filter_source`); ``filtered`` receives the full filter result
        when one was computed; ``early``: ``probe_early(req, query, model_id, k)``'s result.
        """
        dim = int(query.shape[0])
        rules = Eligibility.of(req, now, self._half_life_s)
        if chosen is not None:
            filtered.append(chosen)
            return self._sql_hits(conn, chosen, model_id, query, k) if len(chosen) else []
        ann = self._synced_ann(conn, req.collection, model_id, dim)
        if ann is not None:
            if ann.stale:
                self._rebuild_soon(req.collection, model_id, dim, ann.seq)
            first = early.keys if early is not None and early.ann is ann and early.k == k else None
            found = ann.search(conn, query, k, rules, lambda ids: eligible_subset(
                conn, req, ids, now, self._half_life_s), self._min_similarity, first)
            if found is not None:
                return found
        elif not req.needs_sql_candidates:
            mirror = self.mirror(req.collection, model_id, dim)
            mirror.sync(conn)
            if len(mirror) >= ann_index.MIN_ROWS:  # grown past the exact scan's size: write its first snapshot
                self._rebuild_soon(req.collection, model_id, dim, 0)
            return mirror.search(query, k, rules, min_similarity=self._min_similarity)
        elif self.mirror(req.collection, model_id, dim).loaded:
            found = self._shortlist(conn, req, now, query, model_id, k, rules)
            if found is not None:
                return found
        q, p = sql.candidates_sql(req, now, self._half_life_s)
        candidates = np.fromiter((row[0] for row in conn.execute(q, p)), dtype=np.int64)
        filtered.append(candidates)
        if len(candidates) == 0:
            return []
        mirror = self.mirror(req.collection, model_id, dim)
        if ann is not None or (len(candidates) <= _SQL_VECTOR_LIMIT and not mirror.loaded):
            return self._sql_hits(conn, candidates, model_id, query, k)
        mirror.sync(conn)
        return mirror.search(query, k, rules, candidates=candidates, min_similarity=self._min_similarity)

    def _synced_ann(self, conn: apsw.Connection, collection: str, model_id: str, dim: int) -> AnnIndex | None:
        """The collection's snapshot with its overlay caught up, or None: none, or one the pruning
        of change_log outran (a build that began before a prune and published after it, or a
        process idle since an older snapshot was replaced), whose replacement is then started."""
        ann = self.ann(collection, model_id, dim)
        if ann is None:
            return None
        try:
            ann.sync(conn)
        except ChangesPruned:
            log.info("vector index %s is older than the changes kept since; recall scans exactly until "
                     "a new one is written", ann.path.name)
            with self._lock:
                self._outrun.add(ann.path)
                if self._anns.get((collection, model_id)) is ann:
                    del self._anns[(collection, model_id)]
            self._rebuild_soon(collection, model_id, dim, ann.seq)
            return None
        return ann

    def _shortlist(
        self, conn: apsw.Connection, req: RecallRequest, now: float, query: np.ndarray, model_id: str, k: int,
        rules: Eligibility,
    ) -> list[tuple[int, float]] | None:
        """Broad filters: the best rows overall usually pass, and then the best k that pass are
        exactly the filtered top k. Check the filter on a shortlist of the exact scan first."""
        mirror = self.mirror(req.collection, model_id, int(query.shape[0]))
        mirror.sync(conn)
        all_scores = mirror.score_all(query)
        for shortlist in (8 * k, 64 * k):
            top = mirror.search(query, shortlist, rules, min_similarity=self._min_similarity, all_scores=all_scores)
            passing = eligible_subset(conn, req, [m for m, _ in top], now, self._half_life_s)
            hits = [(m, s) for m, s in top if m in passing]
            if len(hits) >= k or len(top) < shortlist:
                return hits[:k]
        return None

    def similarities(
        self, conn: apsw.Connection, memory_ids: list[int], model_id: str, query: np.ndarray
    ) -> dict[int, float]:
        """Cosine of the query with a few given memories (full-text hits outside the vector list)."""
        if not memory_ids:
            return {}
        q, p = sql.vector_sql(json.dumps(memory_ids), model_id, query.astype(np.float32).tobytes(), len(memory_ids))
        return {int(i): float(s) for i, s in conn.execute(q, p)}

    def _sql_hits(
        self, conn: apsw.Connection, candidates: np.ndarray, model_id: str, query: np.ndarray, k: int
    ) -> list[tuple[int, float]]:
        q, p = sql.vector_sql(json.dumps(candidates.tolist()), model_id, query.astype(np.float32).tobytes(), k)
        return [(int(i), float(s)) for i, s in conn.execute(q, p) if s >= self._min_similarity]
