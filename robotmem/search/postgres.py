"""Recall's store-specific steps in PostgreSQL: tsvector full text, pgvector, GiST points.

The orchestration (fusion, ordering, scoring) is robotmem.search.recall.RecallEngine's;
this subclass only answers its questions in PostgreSQL's SQL:

* full text: ``search_tsv @@ tsquery`` over robotmem's own tokens (the GIN index of live
  memories, the rows SQLite's FTS5 holds), for the words SQLite's plan keeps
  (robotmem.search.fulltext.plan_fulltext: no stopwords, no word too common where rarer
  ones are present), ranked by ``ts_rank`` (not BM25, so rankings may differ from SQLite's;
  the set of eligible matches does not, except that every match is ranked where SQLite
  ranks only the newest window of a common word's);
* vectors: without a filter, the model's HNSW index (``ef_search`` raised to the pool
  size); when that returns fewer rows than asked (eligibility cut some), or with an
  exact filter / session, an exact cosine scan of the eligible rows, so filters stay exact;
* spatial: the same growing box as SQLite (robotmem.search.spatial), over a GiST index
  of the points' x/y with z beside them.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..store.postgres.sql import effective_confidence_sql, sql_literal, tsquery_literal
from ..store.rows import row_to_record
from ..store.tokens import token_parts
from . import sql
from .fulltext import plan_fulltext
from .fusion import order_score
from .recall import RecallEngine, VectorSide
from .request import RecallRequest, SpatialSort
from .spatial import nearest

__all__ = ["PgRecallEngine", "frame_sql", "points_box"]

Query = tuple[str, list[Any]]


class PgRecallEngine(RecallEngine):
    def _where(self, req: RecallRequest, now: float) -> Query:
        return sql.eligibility_sql(req, now, self._half_life_s, dialect="postgresql")

    def _text_hits(self, conn: Any, req: RecallRequest, now: float, k: int, with_vectors: bool,
                   chosen: np.ndarray | None = None) -> tuple[bool, list[int]]:
        # The words SQLite's full-text plan ranks: stopwords and, where rarer words are present, words
        # in more than COMMON_SHARE of the memories go (without a window: every match is ranked).
        plan = plan_fulltext(conn, req.query, allow_window=False)
        if plan is None:
            return False, []
        where, params = self._where(req, now)
        tsquery = tsquery_literal(list(plan.kept), token_parts)
        rows = conn.execute(
            f"SELECT m.id FROM memories m WHERE m.search_tsv @@ ?::tsquery AND {where} "
            "ORDER BY ts_rank(m.search_tsv, ?::tsquery) DESC, m.id DESC LIMIT ?",
            [tsquery, *params, tsquery, k],
        )
        return True, [int(r[0]) for r in rows]

    def _recent(self, conn: Any, req: RecallRequest, now: float, limit: int, exclude: list[int],
                source: Any = None) -> list[int]:
        where, params = self._where(req, now)
        rows = conn.execute(
            f"SELECT m.id FROM memories m WHERE {where} AND NOT (m.id = ANY(?)) "
            "ORDER BY m.occurred_at DESC, m.id DESC LIMIT ?",
            [*params, exclude, limit],
        )
        return [int(r[0]) for r in rows]

    def _best_by_score(self, conn: Any, ids: list[int], matches: dict[int, float], now: float,
                       n: int) -> list[int]:
        conf, params = effective_confidence_sql(now, self._half_life_s)
        position = {memory_id: rank for rank, memory_id in enumerate(ids)}
        rows = conn.execute(f"SELECT m.id, {conf} FROM memories m WHERE m.id = ANY(?)", [*params, ids])
        scored = sorted(((order_score(matches.get(i, 0.0), c), i) for i, c in rows),
                        key=lambda r: (-r[0], position[r[1]]))
        return [i for _, i in scored[:n]]

    def _newest_matches(self, conn: Any, req: RecallRequest, now: float, count: int, exclude: list[int],
                        candidates: np.ndarray | None, source: Any = None) -> list[int]:
        return self._recent(conn, req, now, count, exclude)

    def _probe_early(self, req: RecallRequest, query: Any, k: int) -> None:
        return None  # the server searches its own vector index: nothing to start on this side

    def _vector_side(self, conn: Any, req: RecallRequest, now: float, query: Any, text_ids: list[int], k: int,
                     source: Any = None, chosen: np.ndarray | None = None, early: Any = None) -> VectorSide:
        if query is None:
            return VectorSide()
        hits = self._pg_vector_hits(conn, req, now, query.vector, query.model_id, k)
        similarity = dict(hits)
        missing = [m for m in text_ids if m not in similarity]
        similarity.update(self._similarities(conn, missing, query.model_id, query.vector))
        return VectorSide(hits=hits, similarity=similarity, searched=True)

    def _pg_vector_hits(self, conn: Any, req: RecallRequest, now: float, query: np.ndarray, model_id: str,
                        k: int) -> list[tuple[int, float]]:
        dim = int(query.shape[0])
        vec = np.ascontiguousarray(query, dtype=np.float32)
        where, params = self._where(req, now)
        if not req.needs_sql_candidates:
            conn.execute(f"SET LOCAL hnsw.ef_search = {max(40, min(1000, 2 * k))}")
            # The cast and the constants match the (collection, model)'s partial index, so the
            # planner walks its HNSW graph (without one yet, this is an exact scan of the pair).
            # ``searchable`` too: the index leaves out superseded and forgotten memories' vectors
            # (PostgreSQL migration 8), which would crowd the walk's candidates.
            rows = conn.execute(
                f"SELECT e.memory_id, 1.0 - (e.vector::vector({dim}) <=> ?::vector({dim})) FROM embeddings e "
                f"JOIN memories m ON m.id = e.memory_id WHERE e.model_id = {sql_literal(model_id)} "
                f"AND e.collection = {sql_literal(req.collection)} AND e.searchable AND {where} "
                f"ORDER BY e.vector::vector({dim}) <=> ?::vector({dim}) LIMIT ?",
                [vec, *params, vec, k],
            ).fetchall()
            if len(rows) >= k:
                return [(int(i), float(s)) for i, s in rows if s >= self._min_similarity]
        # Exact: the uncast column matches no index, so every eligible vector is scored.
        rows = conn.execute(
            "SELECT e.memory_id, 1.0 - (e.vector <=> ?) AS similarity FROM embeddings e "
            f"JOIN memories m ON m.id = e.memory_id WHERE e.model_id = ? AND e.dim = ? AND e.searchable AND {where} "
            "ORDER BY e.vector <=> ?, e.memory_id LIMIT ?",
            [vec, model_id, dim, *params, vec, k],
        ).fetchall()
        return [(int(i), float(s)) for i, s in rows if s >= self._min_similarity]

    def _similarities(self, conn: Any, memory_ids: list[int], model_id: str, query: np.ndarray) -> dict[int, float]:
        if not memory_ids:
            return {}
        rows = conn.execute(
            "SELECT memory_id, 1.0 - (vector <=> ?) FROM embeddings WHERE model_id = ? AND dim = ? "
            "AND memory_id = ANY(?)",
            [np.ascontiguousarray(query, dtype=np.float32), model_id, int(query.shape[0]), memory_ids],
        )
        return {int(i): float(s) for i, s in rows}

    def _nearest(self, conn: Any, req: RecallRequest, now: float, need: int,
                 chosen: np.ndarray | None = None) -> list[tuple[int, float]]:
        return nearest(conn, req, now, self._half_life_s, need, points_query=_points_query)

    def _load(self, conn: Any, ids: list[int], now: float) -> list[dict[str, Any]]:
        if not ids:
            return []
        from ..store.postgres.memories import fetch_rows

        by_id = {row[0]: row_to_record(row, now, self._half_life_s) for row in fetch_rows(conn, ids)}
        return [by_id[i] for i in ids if i in by_id]


def _points_query(req: RecallRequest, spatial: SpatialSort, radius: float | None, now: float,
                  half_life_s: float) -> Query:
    where, params = sql.eligibility_sql(req, now, half_life_s, dialect="postgresql")
    box, box_params = points_box(spatial, radius)
    frame, frame_params = frame_sql(spatial)
    return (
        "SELECT r.memory_id, r.xy[0], r.xy[1], r.z FROM spatial_points r JOIN memories m ON m.id = r.memory_id "
        f"WHERE r.field = ?{box}{frame} AND {where}",
        [spatial.field, *box_params, *frame_params, *params],
    )


def frame_sql(spatial: SpatialSort) -> Query:
    """As in SQLite: a memory naming another frame is not compared; one naming none (or null) is."""
    if spatial.frame is None:
        return "", []
    parent = spatial.field.rpartition(".")[0]
    path = "strict $" + "".join("." + json.dumps(p) for p in (f"{parent}.frame" if parent else "frame").split("."))
    frame = (" AND coalesce(nullif(jsonb_path_query_first(m.context, ?::jsonpath, '{}', true), 'null'::jsonb), "
             "to_jsonb(?::text)) = to_jsonb(?::text)")
    return frame, [path, spatial.frame, spatial.frame]


def points_box(spatial: SpatialSort, radius: float | None) -> Query:
    """`` AND ...`` keeping the points of ``spatial_points r`` within ``radius`` of the target on every
    axis it names (the GiST index serves x/y); nothing for None."""
    if radius is None:
        return "", []
    x, y = spatial.target[0], spatial.target[1]
    box = " AND r.xy <@ box(point(?, ?), point(?, ?))"
    params: list[Any] = [x - radius, y - radius, x + radius, y + radius]
    if len(spatial.target) == 3:
        box += " AND r.z BETWEEN ? AND ?"
        params += [spatial.target[2] - radius, spatial.target[2] + radius]
    return box, params
