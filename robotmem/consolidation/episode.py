"""end_session: close the episode and consolidate what it learned (docs/consolidation.md).

Two phases. Reading and deciding (facts, stored vectors, the merge plan, the related
memories) happens first, outside any write lock. Then one write transaction records the
outcome, applies the merges, moves memories across the archive floor and closes the
session, so a crash leaves either the open episode or the fully consolidated one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import apsw

from ..config import Config
from ..embeddings.base import Embedder
from ..errors import NotFoundError
from ..search.recall import RecallEngine
from ..store.backend import Store
from ..search.vector_index import VectorIndex
from .candidates import indexed_earlier
from .decay import decay_pass
from .horizon import changed_since, lock_identities, read_horizon
from .plan import Absorption, MergeRules, absorptions, group_episode, match_earlier
from .reads import NOT_ENDED, earlier_facts, episode_facts
from .related import find_related, refresh_confidence
from .writes import MergeCounts, apply_absorptions, attach_outcome, with_basis

__all__ = ["Settings", "end_session", "plan_session"]

_DAY = 86_400.0


@dataclass(frozen=True)
class Settings:
    rules: MergeRules
    reinforce_step: float
    max_confidence: float
    half_life_s: float
    archive_floor: float
    model_id: str | None
    dim: int | None

    @classmethod
    def of(cls, config: Config, embedder: Embedder | None) -> Settings:
        """The settings of a store with this configuration and embedder (None: no vectors)."""
        return cls(
            rules=MergeRules.from_config(config, embedder.model_id if embedder is not None else None),
            reinforce_step=config.reinforce_step,
            max_confidence=config.max_confidence,
            half_life_s=config.half_life_days * _DAY,
            archive_floor=config.archive_floor,
            model_id=embedder.model_id if embedder is not None else None,
            dim=embedder.dim if embedder is not None else None,
        )


def plan_session(
    conn: apsw.Connection, session_id: str, collection: str, ended_at: float, settings: Settings,
    mirror: VectorIndex | None = None, *, exhaustive: bool = False,
) -> list[Absorption]:
    """What the session's facts merge into: each other, or facts of sessions that ended before ``ended_at``.

    Only the earlier facts that qualify with one of the episode's groups are loaded and scored
    (candidates.py), when every vector the rule could compare can be searched: through
    ``mirror`` (the collection's vector mirror of the settings' model, SQLite), or because there
    is no model. Otherwise, or with ``exhaustive``, every earlier fact of the same
    robot/task/success is loaded and scored (the reference: the plans are the same).
    """
    episode = episode_facts(conn, session_id, settings.model_id, settings.dim)
    if not len(episode):
        return []
    groups = group_episode(episode, settings.rules)
    if not exhaustive and (mirror is not None or settings.model_id is None):
        earlier = indexed_earlier(conn, mirror, episode, groups, settings.rules, collection, session_id, ended_at,
                                  settings.model_id, settings.dim)
    else:
        earlier = earlier_facts(conn, collection, session_id, ended_at, [r.id for r in episode.rows],
                                settings.model_id, settings.dim)
    matches = match_earlier(episode, groups, earlier, settings.rules)
    return with_basis(absorptions(episode, groups, matches, earlier), [*episode.rows, *earlier.rows])


def apply_plan(conn: apsw.Connection, plan: list[Absorption], now: float, settings: Settings) -> MergeCounts:
    return apply_absorptions(conn, plan, now, step=settings.reinforce_step, ceiling=settings.max_confidence,
                             half_life_s=settings.half_life_s)


def end_session(
    db: Store, engine: RecallEngine, settings: Settings, session_id: str, score: float | None, now: float
) -> dict[str, Any]:
    """Close the session and consolidate it; ``engine`` ranks the related memories of earlier episodes."""
    with db.read() as conn:
        session = _require_session(db, conn, session_id)
        if session["status"] == "ended":
            return _already_ended(session)
        mirror = engine.vector_mirror(conn, session["collection"], settings.model_id, settings.dim)
        plan = plan_session(conn, session_id, session["collection"], NOT_ENDED, settings, mirror)
        horizon = read_horizon(conn, session["collection"], session_id)
        related = find_related(engine, conn, session, now, settings.model_id, settings.dim)

    def close(conn: Any) -> dict[str, Any]:
        db.lock_session(conn, session_id)
        current = _require_session(db, conn, session_id)
        if current["status"] == "ended":  # another caller ended it while we were planning
            return _already_ended(current)
        collection = current["collection"]
        lock_identities(conn, collection, session_id)
        todo = plan
        if changed_since(conn, horizon, collection, session_id):
            # Another episode of this robot/task ended (or a fact was written) while we planned:
            # plan again against it, under the lock, as if we had ended after it.
            todo = plan_session(conn, session_id, collection, NOT_ENDED, settings, mirror)
        summary = _consolidate(db, conn, current, score, todo, related, now, settings)
        db.close_session(conn, session_id, now, score, summary)
        return summary

    # Re-run if PostgreSQL picks this transaction as a deadlock's victim (SQLite never does).
    return db.run_write(close)


def _consolidate(
    db: Store, conn: apsw.Connection, session: dict[str, Any], score: float | None, plan: list[Absorption],
    related: list[dict[str, Any]], now: float, settings: Settings,
) -> dict[str, Any]:
    """The state changes, inside the caller's write transaction; returns the summary."""
    session_id = session["session_id"]
    if score is not None:
        attach_outcome(conn, session_id, score, now)
    merges = apply_plan(conn, plan, now, settings)
    decay = decay_pass(conn, session["collection"], now, half_life_s=settings.half_life_s,
                       floor=settings.archive_floor)
    facts, perceptions = db.session_counts(conn, session_id)
    return {
        "session_id": session_id,
        "status": "ended",
        "collection": session["collection"],
        "outcome_score": score,
        "duration_s": round(max(0.0, now - session["started_at"]), 3),
        "memories": facts,
        "perceptions": perceptions,
        "merged": merges.merged,
        "reinforced": merges.reinforced,
        "decayed": decay.decayed,
        "archived": decay.archived,
        "related": refresh_confidence(conn, related, now, settings.half_life_s),
    }


def _require_session(db: Store, conn: apsw.Connection, session_id: str) -> dict[str, Any]:
    session = db.get_session(conn, session_id)
    if session is None:
        raise NotFoundError(f"no session {session_id!r}", field="session_id")
    return session


def _already_ended(session: dict[str, Any]) -> dict[str, Any]:
    """The first summary, unchanged but for the status (sessions imported without one get zeros)."""
    summary = session["summary"] or {
        "session_id": session["session_id"], "collection": session["collection"],
        "outcome_score": session["outcome_score"],
        "duration_s": round(max(0.0, (session["ended_at"] or 0.0) - session["started_at"]), 3),
        "memories": 0, "perceptions": 0, "merged": 0, "reinforced": 0, "decayed": 0, "archived": 0, "related": [],
    }
    return {**summary, "status": "already_ended"}
