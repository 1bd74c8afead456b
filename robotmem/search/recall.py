"""Recall: BM25 and vector hits fused by reciprocal rank, exact filters, spatial order."""

from __future__ import annotations

import json
import threading
from typing import Any

import apsw
import numpy as np

from ..store.connection import Database
from ..store.decay import effective_confidence_sql
from ..store.rows import hits_sql, row_to_record
from . import sql
from .fulltext import eligible_subset, fulltext_hits, plan_fulltext
from .request import RecallRequest
from .spatial import nearest
from .vector_index import Eligibility, VectorIndex

__all__ = ["RecallEngine"]

_RRF_K = 60
#: Below this many SQL candidates and with no warm in-process index, sqlite-vec ranks them in SQL.
_SQL_VECTOR_LIMIT = 2048


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
        pool = max(50, 4 * req.n)
        with self._db.read() as conn:
            bm25_ids: list[int] = []
            vector_hits: list[tuple[int, float]] = []
            with_vectors = query_vector is not None and model_id is not None
            plan = (plan_fulltext(conn, req.query, allow_window=with_vectors and not req.needs_sql_candidates)
                    if req.query else None)
            match = plan is not None
            if plan is not None:
                bm25_ids = fulltext_hits(conn, req, plan, now, self._half_life_s, pool)
            bm25_weights: list[float] | None = None
            filtered: list[np.ndarray] = []  # the vector side's full filter result, when it needed one
            similarity: dict[int, float] = {}
            if req.query and query_vector is not None and model_id is not None:
                vector_hits = self._vector_hits(conn, req, now, query_vector, model_id, pool, filtered)
                similarity.update(vector_hits)
                missing = [m for m in bm25_ids if m not in similarity]
                similarity.update(self._similarities(conn, missing, model_id, query_vector))
                bm25_weights = [_keyword_weight(similarity.get(m)) for m in bm25_ids]
            relevance = _fuse((bm25_ids, bm25_weights), ([m for m, _ in vector_hits], None))
            mode = _mode(req, match, query_vector is not None and model_id is not None)
            distances: dict[int, float] = {}
            if req.spatial is not None:
                ranked = self._spatial_order(conn, req, now, relevance, distances)
            elif req.query:
                ranked = list(relevance)
                if len(ranked) < req.n and req.narrowed:
                    # An explicit filter is exact: its matches come back even when they do not
                    # relate to the query (after every related one, with score 0).
                    ranked += self._newest_matches(conn, req, now, req.n - len(ranked), ranked, filtered)
            else:
                q, p = sql.recent_sql(req, now, self._half_life_s, req.n)
                ranked = [row[0] for row in conn.execute(q, p)]
            if req.spatial is None and req.query:
                ranked = self._best_by_score(conn, ranked[: max(pool, req.n)], relevance, now, req.n)
            records = self._load(conn, ranked, now)
        results = _score(records, relevance, distances, req, mode)
        if mode in ("hybrid", "vector_only"):
            # Rank-fused scores compare hits within one answer; cosine compares across answers.
            for record in results:
                cos = similarity.get(record["id"])
                record["similarity"] = None if cos is None else round(cos, 4)
        return {"mode": mode, "count": len(results), "results": results}

    # -- vectors ---------------------------------------------------------------------

    def _best_by_score(
        self, conn: apsw.Connection, ids: list[int], relevance: dict[int, float], now: float, n: int
    ) -> list[int]:
        """The n best by relevance x decayed confidence, reading only the confidence columns."""
        conf, params = effective_confidence_sql(now, self._half_life_s)
        position = {memory_id: rank for rank, memory_id in enumerate(ids)}
        rows = conn.execute(
            f"SELECT m.id, {conf} FROM json_each(?) AS j CROSS JOIN memories m ON m.id = j.value",
            [*params, json.dumps(ids)],
        )
        scored = sorted(((relevance.get(i, 0.0) * c, i) for i, c in rows), key=lambda r: (-r[0], position[r[1]]))
        return [i for _, i in scored[:n]]

    def _newest_matches(
        self, conn: apsw.Connection, req: RecallRequest, now: float, count: int, exclude: list[int],
        filtered: list[np.ndarray],
    ) -> list[int]:
        """The newest eligible memories not in ``exclude``; reuses a filter result already computed."""
        if filtered:
            rest = np.setdiff1d(filtered[0], np.asarray(exclude, dtype=np.int64))
            if len(rest) <= _SQL_VECTOR_LIMIT:
                return [row[0] for row in conn.execute(
                    "SELECT m.id FROM json_each(?) AS j CROSS JOIN memories m ON m.id = j.value "
                    "ORDER BY m.occurred_at DESC, m.id DESC LIMIT ?", (json.dumps(rest.tolist()), count))]
        q, p = sql.recent_sql(req, now, self._half_life_s, count, json.dumps(exclude))
        return [row[0] for row in conn.execute(q, p)]

    def _vector_hits(
        self, conn: apsw.Connection, req: RecallRequest, now: float, query: np.ndarray, model_id: str, k: int,
        filtered: list[np.ndarray],
    ) -> list[tuple[int, float]]:
        index = self.index_for(req.collection, model_id, int(query.shape[0]))
        rules = Eligibility(
            now=now,
            half_life_s=self._half_life_s,
            min_confidence=req.min_confidence,
            include_archived=req.include_archived,
            since=req.since,
            until=req.until,
        )
        if not req.needs_sql_candidates:
            index.sync(conn)
            return index.search(query, k, rules, min_similarity=self._min_similarity)
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
                    return hits[:k]
        q, p = sql.candidates_sql(req, now, self._half_life_s)
        candidates = np.fromiter((row[0] for row in conn.execute(q, p)), dtype=np.int64)
        filtered.append(candidates)
        if len(candidates) == 0:
            return []
        if len(candidates) <= _SQL_VECTOR_LIMIT and not index.loaded:
            return self._sql_vector_hits(conn, candidates, model_id, query, k)
        index.sync(conn)
        return index.search(query, k, rules, candidates=candidates, min_similarity=self._min_similarity,
                            all_scores=all_scores)

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
        self, conn: apsw.Connection, req: RecallRequest, now: float, relevance: dict[int, float],
        distances: dict[int, float],
    ) -> list[int]:
        assert req.spatial is not None
        # Extra rows so that equal distances can be ordered by relevance.
        rows = nearest(conn, req, now, self._half_life_s, req.n * 2)
        rows.sort(key=lambda r: (round(r[1], 9), -relevance.get(r[0], 0.0)))
        ranked = [memory_id for memory_id, _ in rows[: req.n]]
        distances.update(rows[: req.n])
        if len(ranked) < req.n and req.spatial.max_distance is None:
            # Memories without the field come last: most relevant first, else most recent.
            rest = [m for m in relevance if m not in distances]
            if len(rest) < req.n - len(ranked):
                q, p = sql.recent_sql(req, now, self._half_life_s, req.n, json.dumps(ranked + rest))
                rest += [row[0] for row in conn.execute(q, p)]
            ranked += rest[: req.n - len(ranked)]
        return ranked

    # -- rows ------------------------------------------------------------------------

    def _load(self, conn: apsw.Connection, ids: list[int], now: float) -> list[dict[str, Any]]:
        if not ids:
            return []
        q, p = hits_sql(json.dumps(ids))
        by_id = {row[0]: row_to_record(row, now, self._half_life_s) for row in conn.execute(q, p)}
        return [by_id[i] for i in ids if i in by_id]


def _keyword_weight(similarity: float | None) -> float:
    """How much a full-text hit counts, by its meaning's closeness to the query.

    A hit that shares a word but not the meaning (cosine near 0) is most likely a
    coincidence of wording; it still counts, at a quarter, so exact terms (part numbers,
    parameter names) keep their say. From cosine 0.5 up it counts fully.
    """
    if similarity is None:
        return 0.25
    return min(1.0, max(0.25, similarity / 0.5))


def _fuse(*rankings: tuple[list[int], list[float] | None]) -> dict[int, float]:
    """Weighted reciprocal rank fusion, normalised so that first place in every list scores 1.0."""
    scores: dict[int, float] = {}
    for ranking, weights in rankings:
        for rank, memory_id in enumerate(ranking):
            weight = 1.0 if weights is None else weights[rank]
            scores[memory_id] = scores.get(memory_id, 0.0) + weight / (_RRF_K + rank + 1)
    used = max(1, sum(1 for ranking, _ in rankings if ranking))
    best = used / (_RRF_K + 1)
    return {m: s / best for m, s in sorted(scores.items(), key=lambda kv: -kv[1])}


def _mode(req: RecallRequest, searched_text: bool, searched_vectors: bool) -> str:
    if not req.query:
        return "filter_only"
    if searched_vectors:
        return "hybrid" if searched_text else "vector_only"
    return "bm25_only"


def _score(
    records: list[dict[str, Any]], relevance: dict[int, float], distances: dict[int, float],
    req: RecallRequest, mode: str,
) -> list[dict[str, Any]]:
    for record in records:
        rel = relevance.get(record["id"], 0.0)
        record["score"] = round((rel if mode != "filter_only" else 1.0) * record["confidence"], 6)
        if req.spatial is not None:
            record["distance"] = distances.get(record["id"])
    if req.spatial is None and mode != "filter_only":
        records.sort(key=lambda r: -r["score"])
    return records[: req.n]
