"""Recall: BM25 and vector candidates ranked by calibrated relevance, exact filters, spatial order."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import apsw
import numpy as np

from ..store.backend import dialect_of
from ..store.decay import effective_confidence_sql
from ..store.rows import hits_sql, row_to_record
from . import sql
from .ann_index import index_folder
from .fulltext import fulltext_hits, plan_fulltext
from .fusion import Fused, fuse, fuse_more, order_score
from .relevance import NARROW_ROWS, informative_tokens
from .request import RecallRequest
from .spatial import distance_key, nearest_sqlite
from .vector_index import VectorIndex
from .vectors import EarlyProbe, VectorSearch, filter_source

__all__ = ["RecallEngine", "VectorSide"]

#: A computed filter result up to this size orders its newest matches directly.
_SQL_VECTOR_LIMIT = 2048
#: A spatial recall's vector search for the query's best matches: enough that one the model can
#: judge (an English memory for an English query) is among them.
NEAREST_FIRST_ANCHORS = 4


@dataclass(frozen=True)
class _QueryVector:
    vector: np.ndarray
    model_id: str


@dataclass(frozen=True)
class _Answer:
    """Memory ids in answer order (before the final scoring), with what scores and describes them."""

    ranked: list[int]
    fused: Fused
    distances: dict[int, float]
    similarity: dict[int, float]
    searched_text: bool


@dataclass(frozen=True)
class VectorSide:
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
    def __init__(self, db: Any, *, half_life_s: float, min_similarity: float = 0.2) -> None:
        self._db = db
        self._half_life_s = half_life_s
        self._min_similarity = min_similarity
        folder = index_folder(db.path) if getattr(db, "kind", "sqlite") == "sqlite" else None
        self._vectors = VectorSearch(folder, half_life_s=half_life_s, min_similarity=min_similarity,
                                     db=db if folder is not None else None)

    def vector_mirror(
        self, conn: Any, collection: str, model_id: str | None, dim: int | None
    ) -> VectorIndex | None:
        """An in-process exact mirror of a collection's fact vectors of one model (SQLite stores
        only; None on PostgreSQL or without a model): consolidation's candidate search."""
        if model_id is None or dim is None or dialect_of(conn) != "sqlite":
            return None
        return self._vectors.mirror(collection, model_id, dim, facts_only=True)

    def recall(
        self, req: RecallRequest, now: float, query_vector: np.ndarray | None, model_id: str | None
    ) -> dict[str, Any]:
        # Decided once: vectors are searched only for a query, with a vector and a model to match.
        query = (_QueryVector(query_vector, model_id)
                 if req.query and query_vector is not None and model_id is not None else None)
        with self._db.read() as conn:
            source = filter_source(conn, req)  # a selective filter's leaf-index candidates
            # A selective filter's exact result, computed once for every side that needs it.
            chosen = (self._filtered(conn, req, now, source)
                      if source is not None and (req.query or req.spatial is not None) else None)
            # With a spatial sort, the nearest memories (and extra ones, so that equal distances at
            # the cut are ordered by the query too) are found once, for either path below.
            near = self._nearest(conn, req, now, req.n * 2, chosen) if req.spatial is not None else None
            answer = (self._nearest_first(conn, req, now, query, chosen, near)
                      if near is not None and req.query else None)
            if answer is None:
                answer = self._searched(conn, req, now, query, source, chosen, near)
            records = self._load(conn, answer.ranked, now)
        mode = _mode(req, answer.searched_text, query is not None)
        results = _score(records, answer.fused, answer.distances, req, mode,
                         answer.similarity if query is not None else None)
        return {"mode": mode, "count": len(results), "results": results}

    def _searched(
        self, conn: apsw.Connection, req: RecallRequest, now: float, query: _QueryVector | None,
        source: sql.Query | None, chosen: np.ndarray | None, near: list[tuple[int, float]] | None,
    ) -> _Answer:
        """The answer from both candidate searches (full text and vectors), fused; ``near``: the
        nearest memories when sorting in space."""
        pool = max(50, 4 * req.n)
        early = self._probe_early(req, query, pool) if source is None else None
        searched_text, text_ids = (self._text_hits(conn, req, now, pool, query is not None, chosen)
                                   if req.query else (False, []))
        side = self._vector_side(conn, req, now, query, text_ids, pool, source, chosen, early)
        fused, similarity = Fused(), side.similarity
        if req.query:
            left = self._narrowed_rows(conn, req, now, chosen if chosen is not None else side.candidates)
            # A filter or episode that leaves fewer memories than NARROW_ROWS is ranked whole: every
            # memory it leaves is scored, not only those the two searches found.
            few = [] if left is None or len(left) >= NARROW_ROWS else [int(m) for m in left]
            similarity = self._with_similarities(conn, query, similarity, few)
            fused = fuse(conn, req.query, text_ids + side.ids + few, similarity if query is not None else None,
                         _model(query), _count(left))
        ranked, distances = self._order(conn, req, now, fused, side.candidates, source, near)
        added = [m for m in ranked if m not in fused.match]
        if req.query and added:
            # Memories the answer took in besides the candidates (an exact filter's other matches,
            # memories without the spatial field) carry the relevance of the same pair as a candidate.
            similarity = self._with_similarities(conn, query, similarity, added)
            fused = fuse_more(conn, req.query, fused, added, similarity if query is not None else None, _model(query))
        if req.spatial is None and req.query:
            ranked = self._best_by_score(conn, ranked[: max(pool, req.n)], fused.match, now, req.n)
        return _Answer(ranked, fused, distances, similarity, searched_text)

    def _with_similarities(
        self, conn: Any, query: _QueryVector | None, similarity: dict[int, float], memory_ids: list[int],
    ) -> dict[int, float]:
        """``similarity`` with the cosines of ``memory_ids`` added (unchanged without a query vector)."""
        missing = [m for m in memory_ids if m not in similarity]
        if query is None or not missing:
            return similarity
        return {**similarity, **self._similarities(conn, missing, query.model_id, query.vector)}

    def _nearest_first(
        self, conn: apsw.Connection, req: RecallRequest, now: float, query: _QueryVector | None,
        chosen: np.ndarray | None, rows: list[tuple[int, float]],
    ) -> _Answer | None:
        """A spatial sort with a query, when the nearest memories (``rows``) fill the answer: only
        their match with the query orders (equal distances) and describes them, so it is computed
        for them alone instead of searching the store by text and meaning. Relevance stays
        comparable with other recalls: its best cosine comes from the query's best eligible
        matches by vector (NEAREST_FIRST_ANCHORS of them), found by a short vector search. None
        when fewer than n memories have the field (the rest come by relevance: the full search
        decides them)."""
        assert req.spatial is not None
        if len(rows) < req.n and req.spatial.max_distance is None:
            return None
        ids = [memory_id for memory_id, _ in rows]
        similarity: dict[int, float] = {}
        anchors: list[int] = []
        known = chosen  # the filter's rows, when a search has them (else _narrowed_rows reads them)
        if query is not None:
            side = self._vector_side(conn, req, now, query, ids, NEAREST_FIRST_ANCHORS, None, chosen)
            similarity, anchors = side.similarity, side.ids
            known = chosen if chosen is not None else side.candidates
        fused = fuse(conn, req.query, ids + anchors, similarity if query is not None else None, _model(query),
                     _count(self._narrowed_rows(conn, req, now, known)))
        ranked, distances = _nearest_n(rows, fused.match, req.n)
        return _Answer(ranked, fused, distances, similarity, bool(informative_tokens(req.query)))

    def _order(
        self, conn: apsw.Connection, req: RecallRequest, now: float, fused: Fused,
        candidates: np.ndarray | None, source: sql.Query | None, near: list[tuple[int, float]] | None,
    ) -> tuple[list[int], dict[int, float]]:
        """Memory ids in answer order (before the final scoring), and distances when sorted in space
        (``near``: the nearest memories)."""
        if near is not None:
            return self._spatial_order(conn, req, now, fused.match, near)
        if not req.query:
            return self._recent(conn, req, now, req.n, [], source), {}
        ranked = [m for m in fused.match if fused.relevance[m] >= req.min_relevance]
        if len(ranked) < req.n and req.narrowed and req.min_relevance == 0:
            # An explicit filter is exact: asked for every hit (min_relevance 0), its matches
            # come back even when neither search found them (a filter that leaves fewer than
            # NARROW_ROWS memories is already ranked whole); each is scored in _searched.
            ranked += self._newest_matches(conn, req, now, req.n - len(ranked), ranked, candidates, source)
        return ranked, {}

    # -- vectors ---------------------------------------------------------------------

    # -- the store-specific steps (robotmem.search.postgres overrides them) ----------------

    def _narrowed_rows(self, conn: Any, req: RecallRequest, now: float, known: np.ndarray | None) -> np.ndarray | None:
        """The memories the request's filter or session leaves, up to NARROW_ROWS of them (relevance's
        narrowness); ``known``: all of them, when a search already computed the set. None: neither narrows."""
        if not req.needs_sql_candidates:
            return None
        if known is not None:
            return known
        where, params = self._where(req, now)
        rows = conn.execute(f"SELECT m.id FROM memories m WHERE {where} LIMIT ?", [*params, NARROW_ROWS])
        return np.fromiter((row[0] for row in rows), dtype=np.int64)

    def _where(self, req: RecallRequest, now: float) -> sql.Query:
        return sql.eligibility_sql(req, now, self._half_life_s)

    def _filtered(self, conn: apsw.Connection, req: RecallRequest, now: float, source: sql.Query) -> np.ndarray:
        """Every eligible memory among a selective filter's leaf-index candidates (the exact filter result)."""
        q, p = sql.candidates_sql(req, now, self._half_life_s, source)
        return np.fromiter((row[0] for row in conn.execute(q, p)), dtype=np.int64)

    def _text_hits(
        self, conn: apsw.Connection, req: RecallRequest, now: float, k: int, with_vectors: bool,
        chosen: np.ndarray | None = None,
    ) -> tuple[bool, list[int]]:
        """(whether the query had searchable words, the best k full-text hits)."""
        plan = plan_fulltext(conn, req.query, allow_window=with_vectors)
        if plan is None:
            return False, []
        return True, fulltext_hits(conn, req, plan, now, self._half_life_s, k, chosen)

    def _recent(self, conn: apsw.Connection, req: RecallRequest, now: float, limit: int,
                exclude: list[int], source: sql.Query | None = None) -> list[int]:
        """The newest eligible memories not in ``exclude``."""
        q, p = sql.recent_sql(req, now, self._half_life_s, limit, json.dumps(exclude), source=source)
        return [row[0] for row in conn.execute(q, p)]

    def _nearest(self, conn: apsw.Connection, req: RecallRequest, now: float, need: int,
                 chosen: np.ndarray | None = None) -> list[tuple[int, float]]:
        return nearest_sqlite(conn, req, now, self._half_life_s, need, chosen)

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
        candidates: np.ndarray | None, source: sql.Query | None,
    ) -> list[int]:
        """The newest eligible memories not in ``exclude``; reuses a filter result already computed."""
        if candidates is not None:
            rest = np.setdiff1d(candidates, np.asarray(exclude, dtype=np.int64))
            if len(rest) <= _SQL_VECTOR_LIMIT:
                return [row[0] for row in conn.execute(
                    "SELECT m.id FROM json_each(?) AS j CROSS JOIN memories m ON m.id = j.value "
                    "ORDER BY m.occurred_at DESC, m.id DESC LIMIT ?", (json.dumps(rest.tolist()), count))]
        return self._recent(conn, req, now, count, exclude, source)

    def _probe_early(self, req: RecallRequest, query: _QueryVector | None, k: int) -> EarlyProbe | None:
        """The vector index's first probe for the query, started before the full-text search so
        that the two overlap (robotmem.search.vectors.VectorSearch.probe_early)."""
        if query is None:
            return None
        return self._vectors.probe_early(req, query.vector, query.model_id, k)

    def _vector_side(
        self, conn: apsw.Connection, req: RecallRequest, now: float, query: _QueryVector | None,
        text_ids: list[int], k: int, source: sql.Query | None, chosen: np.ndarray | None = None,
        early: EarlyProbe | None = None,
    ) -> VectorSide:
        if query is None:
            return VectorSide()
        if source is not None and chosen is None:
            chosen = self._filtered(conn, req, now, source)
        filtered: list[np.ndarray] = []
        hits = self._vectors.hits(conn, req, now, query.vector, query.model_id, k, chosen, filtered, early)
        similarity = dict(hits)
        missing = [m for m in text_ids if m not in similarity]
        similarity.update(self._similarities(conn, missing, query.model_id, query.vector))
        return VectorSide(hits=hits, similarity=similarity, candidates=filtered[0] if filtered else None,
                           searched=True)

    def _similarities(self, conn: Any, memory_ids: list[int], model_id: str, query: np.ndarray) -> dict[int, float]:
        """Cosine of the query with the given memories (those outside the vector search's list)."""
        return self._vectors.similarities(conn, memory_ids, model_id, query)

    # -- spatial ---------------------------------------------------------------------

    def _spatial_order(
        self, conn: apsw.Connection, req: RecallRequest, now: float, matches: dict[int, float],
        near: list[tuple[int, float]],
    ) -> tuple[list[int], dict[int, float]]:
        assert req.spatial is not None
        ranked, distances = _nearest_n(near, matches, req.n)
        if len(ranked) < req.n and req.spatial.max_distance is None:
            # Memories without the field come last: most relevant first, else most recent.
            rest = [m for m in matches if m not in distances]
            if len(rest) < req.n - len(ranked):
                rest += self._recent(conn, req, now, req.n, ranked + rest)
            ranked += rest[: req.n - len(ranked)]
        return ranked, distances

    # -- rows ------------------------------------------------------------------------

    def _load(self, conn: apsw.Connection, ids: list[int], now: float) -> list[dict[str, Any]]:
        if not ids:
            return []
        q, p = hits_sql(json.dumps(ids))
        by_id = {row[0]: row_to_record(row, now, self._half_life_s) for row in conn.execute(q, p)}
        return [by_id[i] for i in ids if i in by_id]


def _nearest_n(
    rows: list[tuple[int, float]], matches: dict[int, float], n: int
) -> tuple[list[int], dict[int, float]]:
    """The n nearest (memory_id, distance) rows, equal distances by match with the query (the nearest
    rows come with extra ones so that ties at the cut are ordered by it too)."""
    rows = sorted(rows, key=lambda r: (distance_key(r[1]), -matches.get(r[0], 0.0)))[:n]
    return [memory_id for memory_id, _ in rows], dict(rows)


def _count(rows: np.ndarray | None) -> int | None:
    return None if rows is None else len(rows)


def _model(query: _QueryVector | None) -> str | None:
    return None if query is None else query.model_id


def _mode(req: RecallRequest, searched_text: bool, searched_vectors: bool) -> str:
    if not req.query:
        return "filter_only"
    if searched_vectors:
        return "hybrid" if searched_text else "vector_only"
    return "bm25_only"


def _score(
    records: list[dict[str, Any]], fused: Fused, distances: dict[int, float],
    req: RecallRequest, mode: str, similarity: dict[int, float] | None,
) -> list[dict[str, Any]]:
    for record in records:
        if mode == "filter_only":
            record["relevance"] = None
            record["score"] = record["confidence"]
        else:
            match = fused.match.get(record["id"])
            record["relevance"] = fused.relevance.get(record["id"], 0.0)
            record["score"] = round(order_score(match or 0.0, record["confidence"]), 6)
        if req.spatial is not None:
            record["distance"] = distances.get(record["id"])
        if similarity is not None:
            cos = similarity.get(record["id"])
            record["similarity"] = None if cos is None else round(cos, 4)
    if req.spatial is None and mode != "filter_only":
        records.sort(key=lambda r: -r["score"])
    return records[: req.n]
