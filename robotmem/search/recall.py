"""Recall: BM25 and vector candidates ranked by calibrated relevance, exact filters, spatial order."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

import apsw
import numpy as np

from ..store.connection import Database
from ..store.decay import effective_confidence_sql
from ..store.rows import hits_sql, row_to_record
from . import sql
from .eligibility import Eligibility
from .fulltext import eligible_subset, fulltext_hits, plan_fulltext
from .fusion import fuse, order_score
from .relevance import calibrated
from .request import RecallRequest
from .spatial import nearest
from .vector_index import VectorIndex

__all__ = ["RecallEngine"]

#: Below this many SQL candidates and with no warm in-process index, sqlite-vec ranks them in SQL.
_SQL_VECTOR_LIMIT = 2048


@dataclass(frozen=True)
class _QueryVector:
    vector: np.ndarray
    model_id: str


@dataclass(frozen=True)
class _VectorSide:
    """What the vector search found: nearest hits, cosines (also of full-text hits), the filter result."""

    hits: list[tuple[int, float]] = field(default_factory=list)
    similarity: dict[int, float] = field(default_factory=dict)
    #: every eligible memory id, when the vector side had to compute the filter in full
    candidates: np.ndarray | None = None
    searched: bool = False

    @property
    def ids(self) -> list[int]:
        return [memory_id for memory_id, _ in self.hits]


class RecallEngine:
    def __init__(self, db: Database, *, half_life_s: float, min_similarity: float = 0.2) -> None:
        self._db = db
        self._half_life_s = half_life_s
        self._min_similarity = min_similarity
        self._indexes: dict[tuple[str, str], VectorIndex] = {}
        self._lock = threading.Lock()

    def index_for(self, collection: str, model_id: str, dim: int) -> VectorIndex:
        key = (collection, model_id)
        with self._lock:
            index = self._indexes.get(key)
            if index is None:
                index = self._indexes[key] = VectorIndex(collection, model_id, dim)
            return index

    def recall(
        self, req: RecallRequest, now: float, query_vector: np.ndarray | None, model_id: str | None
    ) -> dict[str, Any]:
        # Decided once: vectors are searched only for a query, with a vector and a model to match.
        query = (_QueryVector(query_vector, model_id)
                 if req.query and query_vector is not None and model_id is not None else None)
        pool = max(50, 4 * req.n)
        with self._db.read() as conn:
            plan = (plan_fulltext(conn, req.query, allow_window=query is not None and not req.needs_sql_candidates)
                    if req.query else None)
            text_ids = fulltext_hits(conn, req, plan, now, self._half_life_s, pool) if plan is not None else []
            side = self._vector_side(conn, req, now, query, text_ids, pool)
            matches = (fuse(conn, req.query, text_ids + side.ids, side.similarity if side.searched else None)
                         if req.query else {})
            ranked, distances = self._order(conn, req, now, matches, side.candidates)
            if req.spatial is None and req.query:
                ranked = self._best_by_score(conn, ranked[: max(pool, req.n)], matches, now, req.n)
            records = self._load(conn, ranked, now)
        mode = _mode(req, plan is not None, query is not None)
        results = _score(records, matches, distances, req, mode, side.similarity if query is not None else None)
        return {"mode": mode, "count": len(results), "results": results}

    def _order(
        self, conn: apsw.Connection, req: RecallRequest, now: float, matches: dict[int, float],
        candidates: np.ndarray | None,
    ) -> tuple[list[int], dict[int, float]]:
        """Memory ids in answer order (before the final scoring), and distances when sorted in space."""
        if req.spatial is not None:
            return self._spatial_order(conn, req, now, matches)
        if not req.query:
            q, p = sql.recent_sql(req, now, self._half_life_s, req.n)
            return [row[0] for row in conn.execute(q, p)], {}
        ranked = [m for m, match in matches.items() if calibrated(match) >= req.min_relevance]
        if len(ranked) < req.n and req.narrowed and req.min_relevance == 0:
            # An explicit filter is exact: asked for every hit (min_relevance 0), its matches
            # come back even when they do not relate to the query (after every related one).
            ranked += self._newest_matches(conn, req, now, req.n - len(ranked), ranked, candidates)
        return ranked, {}

    # -- vectors ---------------------------------------------------------------------

    def _best_by_score(
        self, conn: apsw.Connection, ids: list[int], matches: dict[int, float], now: float, n: int
    ) -> list[int]:
        """The n best by relevance, then decayed confidence (fusion.order_score), reading only those columns."""
        conf, params = effective_confidence_sql(now, self._half_life_s)
        position = {memory_id: rank for rank, memory_id in enumerate(ids)}
        rows = conn.execute(
            f"SELECT m.id, {conf} FROM json_each(?) AS j CROSS JOIN memories m ON m.id = j.value",
            [*params, json.dumps(ids)],
        )
        scored = sorted(((order_score(matches.get(i, 0.0), c), i) for i, c in rows), key=lambda r: (-r[0], position[r[1]]))
        return [i for _, i in scored[:n]]

    def _newest_matches(
        self, conn: apsw.Connection, req: RecallRequest, now: float, count: int, exclude: list[int],
        candidates: np.ndarray | None,
    ) -> list[int]:
        """The newest eligible memories not in ``exclude``; reuses a filter result already computed."""
        if candidates is not None:
            rest = np.setdiff1d(candidates, np.asarray(exclude, dtype=np.int64))
            if len(rest) <= _SQL_VECTOR_LIMIT:
                return [row[0] for row in conn.execute(
                    "SELECT m.id FROM json_each(?) AS j CROSS JOIN memories m ON m.id = j.value "
                    "ORDER BY m.occurred_at DESC, m.id DESC LIMIT ?", (json.dumps(rest.tolist()), count))]
        q, p = sql.recent_sql(req, now, self._half_life_s, count, json.dumps(exclude))
        return [row[0] for row in conn.execute(q, p)]

    def _vector_side(
        self, conn: apsw.Connection, req: RecallRequest, now: float, query: _QueryVector | None,
        text_ids: list[int], k: int,
    ) -> _VectorSide:
        if query is None:
            return _VectorSide()
        hits, candidates = self._vector_hits(conn, req, now, query.vector, query.model_id, k)
        similarity = dict(hits)
        missing = [m for m in text_ids if m not in similarity]
        similarity.update(self._similarities(conn, missing, query.model_id, query.vector))
        return _VectorSide(hits=hits, similarity=similarity, candidates=candidates, searched=True)

    def _vector_hits(
        self, conn: apsw.Connection, req: RecallRequest, now: float, query: np.ndarray, model_id: str, k: int,
    ) -> tuple[list[tuple[int, float]], np.ndarray | None]:
        """The k nearest eligible memories, and the full filter result when one was computed."""
        index = self.index_for(req.collection, model_id, int(query.shape[0]))
        rules = Eligibility.of(req, now, self._half_life_s)
        if not req.needs_sql_candidates:
            index.sync(conn)
            return index.search(query, k, rules, min_similarity=self._min_similarity), None
        all_scores = None
        if index.loaded:
            # Broad filters: the best rows overall usually pass, and then the best k that
            # pass are exactly the filtered top k. Check the filter on a shortlist first.
            index.sync(conn)
            all_scores = index.score_all(query)
            for shortlist in (8 * k, 64 * k):
                top = index.search(query, shortlist, rules, min_similarity=self._min_similarity,
                                   all_scores=all_scores)
                passing = eligible_subset(conn, req, [m for m, _ in top], now, self._half_life_s)
                hits = [(m, s) for m, s in top if m in passing]
                if len(hits) >= k or len(top) < shortlist:
                    return hits[:k], None
        q, p = sql.candidates_sql(req, now, self._half_life_s)
        candidates = np.fromiter((row[0] for row in conn.execute(q, p)), dtype=np.int64)
        if len(candidates) == 0:
            return [], candidates
        if len(candidates) <= _SQL_VECTOR_LIMIT and not index.loaded:
            return self._sql_vector_hits(conn, candidates, model_id, query, k), candidates
        index.sync(conn)
        return index.search(query, k, rules, candidates=candidates, min_similarity=self._min_similarity,
                            all_scores=all_scores), candidates

    def _similarities(
        self, conn: apsw.Connection, memory_ids: list[int], model_id: str, query: np.ndarray
    ) -> dict[int, float]:
        """Cosine of the query with a few given memories (full-text hits outside the vector list)."""
        if not memory_ids:
            return {}
        q, p = sql.vector_sql(json.dumps(memory_ids), model_id, query.astype(np.float32).tobytes(), len(memory_ids))
        return {int(i): float(s) for i, s in conn.execute(q, p)}

    def _sql_vector_hits(
        self, conn: apsw.Connection, candidates: np.ndarray, model_id: str, query: np.ndarray, k: int
    ) -> list[tuple[int, float]]:
        q, p = sql.vector_sql(json.dumps(candidates.tolist()), model_id, query.astype(np.float32).tobytes(), k)
        return [(int(i), float(s)) for i, s in conn.execute(q, p) if s >= self._min_similarity]

    # -- spatial ---------------------------------------------------------------------

    def _spatial_order(
        self, conn: apsw.Connection, req: RecallRequest, now: float, matches: dict[int, float],
    ) -> tuple[list[int], dict[int, float]]:
        assert req.spatial is not None
        # Extra rows so that equal distances can be ordered by relevance.
        rows = nearest(conn, req, now, self._half_life_s, req.n * 2)
        rows.sort(key=lambda r: (round(r[1], 9), -matches.get(r[0], 0.0)))
        ranked = [memory_id for memory_id, _ in rows[: req.n]]
        distances = dict(rows[: req.n])
        if len(ranked) < req.n and req.spatial.max_distance is None:
            # Memories without the field come last: most relevant first, else most recent.
            rest = [m for m in matches if m not in distances]
            if len(rest) < req.n - len(ranked):
                q, p = sql.recent_sql(req, now, self._half_life_s, req.n, json.dumps(ranked + rest))
                rest += [row[0] for row in conn.execute(q, p)]
            ranked += rest[: req.n - len(ranked)]
        return ranked, distances

    # -- rows ------------------------------------------------------------------------

    def _load(self, conn: apsw.Connection, ids: list[int], now: float) -> list[dict[str, Any]]:
        if not ids:
            return []
        q, p = hits_sql(json.dumps(ids))
        by_id = {row[0]: row_to_record(row, now, self._half_life_s) for row in conn.execute(q, p)}
        return [by_id[i] for i in ids if i in by_id]


def _mode(req: RecallRequest, searched_text: bool, searched_vectors: bool) -> str:
    if not req.query:
        return "filter_only"
    if searched_vectors:
        return "hybrid" if searched_text else "vector_only"
    return "bm25_only"


def _score(
    records: list[dict[str, Any]], matches: dict[int, float], distances: dict[int, float],
    req: RecallRequest, mode: str, similarity: dict[int, float] | None,
) -> list[dict[str, Any]]:
    for record in records:
        if mode == "filter_only":
            record["relevance"] = None
            record["score"] = record["confidence"]
        else:
            match = matches.get(record["id"])
            record["relevance"] = 0.0 if match is None else round(calibrated(match), 4)
            record["score"] = round(order_score(match or 0.0, record["confidence"]), 6)
        if req.spatial is not None:
            record["distance"] = distances.get(record["id"])
        if similarity is not None:
            cos = similarity.get(record["id"])
            record["similarity"] = None if cos is None else round(cos, 4)
    if req.spatial is None and mode != "filter_only":
        records.sort(key=lambda r: -r["score"])
    return records[: req.n]
