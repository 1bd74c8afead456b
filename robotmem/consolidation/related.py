"""Proactive recall: what earlier episodes know that is relevant to the one ending.

The episode is summarised as a query without running the model:

* text: its most frequent words (facts first; perceptions when it has no facts);
* vector: the normalised mean of its memories' stored vectors (same preference);
* filter: memories of *other* sessions only, with the episode's ``task.name`` and
  ``robot.id`` when it has them (from the session context, else the most common value
  among its memories); a memory's own context wins over its session's.

Then the ordinary hybrid recall ranks the candidates (BM25 + vectors fused, times decayed
confidence), with recall's default ``min_confidence``.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, cast

import apsw
import numpy as np

from ..search.filters import CompiledFilter
from ..search.recall import RecallEngine
from ..search.request import RecallRequest
from ..store.backend import as_vector_bytes, dialect_of
from ..store.decay import effective_confidence_sql
from .similarity import signature

__all__ = ["RELATED_LIMIT", "find_related", "refresh_confidence"]

RELATED_LIMIT = 5
_MIN_CONFIDENCE = 0.3
_QUERY_TOKENS = 16
_QUERY_ROWS = 500


def _identity_value(conn: apsw.Connection, session: dict[str, Any], section: str, key: str) -> Any:
    section_value = session["context"].get(section)
    value = section_value.get(key) if isinstance(section_value, dict) else None
    if value is None:
        most_common = (
            f"SELECT v FROM (SELECT context #> '{{{section},{key}}}' AS v FROM memories WHERE session_id = ?) s "
            "WHERE v IS NOT NULL AND v <> 'null'::jsonb GROUP BY v ORDER BY count(*) DESC, v LIMIT 1"
            if dialect_of(conn) == "postgresql" else
            f"SELECT json_extract(context, '$.{section}.{key}') AS v FROM memories "
            "WHERE session_id = ? AND v IS NOT NULL GROUP BY v ORDER BY count(*) DESC, v LIMIT 1"
        )
        row = conn.execute(most_common, (session["session_id"],)).fetchone()
        value = None if row is None else row[0]
    # Only scalars can be matched with json_extract(...) = ?; other shapes are not an identity.
    return value if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None


def _filter(conn: apsw.Connection, session: dict[str, Any]) -> CompiledFilter:
    sql = ["(m.session_id IS NOT NULL AND m.session_id != ?)"]
    params: list[Any] = [session["session_id"]]
    for section, key in (("task", "name"), ("robot", "id")):
        value = _identity_value(conn, session, section, key)
        if value is None:
            continue
        if dialect_of(conn) == "postgresql":
            sql.append(
                f"coalesce(nullif(m.context #> '{{{section},{key}}}', 'null'::jsonb), (SELECT nullif(s.context #> "
                f"'{{{section},{key}}}', 'null'::jsonb) FROM sessions s WHERE s.id = m.session_id)) = ?::jsonb"
            )
            params.append(json.dumps(value))
        else:
            sql.append(
                f"coalesce(json_extract(m.context, '$.{section}.{key}'), (SELECT json_extract(s.context, "
                f"'$.{section}.{key}') FROM sessions s WHERE s.id = m.session_id)) = ?"
            )
            params.append(value)
    return CompiledFilter(sql="(" + " AND ".join(sql) + ")", params=tuple(params))


def _episode_texts(conn: apsw.Connection, session_id: str) -> list[str]:
    rows = conn.execute(
        "SELECT content FROM memories WHERE session_id = ? AND status = 'active' "
        "ORDER BY type = 'fact' DESC, occurred_at LIMIT ?",
        (session_id, _QUERY_ROWS),
    ).fetchall()
    return [str(r[0]) for r in rows]


def _query_text(texts: list[str]) -> str:
    """The episode's most frequent words of three letters or more (the cached signatures'
    words; every such word is also an indexed search token)."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(w for w in signature(text).words if len(w) > 2)
    return " ".join(token for token, _ in counts.most_common(_QUERY_TOKENS))


def _centroid(conn: apsw.Connection, session_id: str, model_id: str, dim: int) -> np.ndarray | None:
    for kinds in (("fact",), ("fact", "perception")):
        blobs = [b for b in (as_vector_bytes(r[0]) for r in conn.execute(
            "SELECT e.vector FROM embeddings e JOIN memories m ON m.id = e.memory_id WHERE m.session_id = ? "
            "AND m.status = 'active' AND e.model_id = ? AND (m.type = ? OR m.type = ?)",
            (session_id, model_id, kinds[0], kinds[-1]),
        )) if b is not None and len(b) == 4 * dim]
        if blobs:
            mean = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(-1, dim).mean(axis=0)
            norm = float(np.linalg.norm(mean))
            return (mean / norm).astype(np.float32) if norm > 0 else None
    return None


def find_related(
    engine: RecallEngine, conn: apsw.Connection, session: dict[str, Any], now: float,
    model_id: str | None, dim: int | None,
) -> list[dict[str, Any]]:
    """Up to RELATED_LIMIT compact hits from other sessions, most relevant first."""
    request = RecallRequest(
        query=_query_text(_episode_texts(conn, session["session_id"])),
        collection=session["collection"],
        n=RELATED_LIMIT,
        min_confidence=_MIN_CONFIDENCE,
        filter=_filter(conn, session),
        # The query is a whole episode's text: no single memory covers much of it, so the
        # per-hit relevance threshold meant for questions would drop every related one.
        min_relevance=0.0,
    )
    vector = _centroid(conn, session["session_id"], model_id, dim) if model_id and dim else None
    found = engine.recall(request, now, vector, model_id if vector is not None else None)
    return [
        {"id": hit["id"], "content": hit["content"], "type": hit["type"], "session_id": hit["session_id"],
         "confidence": hit["confidence"], "score": hit["score"]}
        for hit in found["results"]
    ]


def refresh_confidence(
    conn: apsw.Connection, related: list[dict[str, Any]], now: float, half_life_s: float
) -> list[dict[str, Any]]:
    """Confidence as of the end of consolidation (this episode may have reinforced a related memory)."""
    if not related:
        return related
    ids = "[" + ",".join(str(hit["id"]) for hit in related) + "]"
    pg = dialect_of(conn) == "postgresql"
    conf, conf_params = effective_confidence_sql(now, half_life_s, dialect=dialect_of(conn))
    among = "m.id = ANY(?)" if pg else "m.id IN (SELECT value FROM json_each(?))"
    rows = {cast(int, r[0]): cast(float, r[1]) for r in conn.execute(
        f"SELECT m.id, {conf} FROM memories m WHERE {among} AND m.status = 'active'",
        (*conf_params, [hit["id"] for hit in related] if pg else ids),
    )}
    return [{**hit, "confidence": round(rows[hit["id"]], 6)} for hit in related if hit["id"] in rows]
