"""``robotmem consolidate``: the end_session consolidation over every ended session, offline.

For a store filled by bulk import or replay. Sessions are visited in the order they
ended, so each one is compared with the state its predecessors left, exactly as if
end_session had consolidated them one by one; each session is one write transaction
(a crash keeps every finished session). The decay pass runs once at the end. Running
it again changes nothing: what did not merge the first time does not merge now.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..search.recall import RecallEngine
from ..store.backend import Store
from .decay import decay_pass
from .episode import Settings, apply_plan, plan_session
from .writes import attach_outcome

__all__ = ["consolidate_ended"]

Progress = Callable[[int, int], None]


def _ended_sessions(db: Store, collection: str | None) -> list[tuple[str, str, float, float | None]]:
    where, params = ("AND collection = ?", (collection,)) if collection is not None else ("", ())
    with db.read() as conn:
        return [
            (r[0], r[1], float(r[2]), r[3]) for r in conn.execute(
                f"SELECT id, collection, ended_at, outcome_score FROM sessions WHERE ended_at IS NOT NULL {where} "
                "ORDER BY ended_at, id",
                params,
            )
        ]


def _collections(db: Store, collection: str | None) -> list[str]:
    if collection is not None:
        return [collection]
    with db.read() as conn:
        return [r[0] for r in conn.execute("SELECT DISTINCT collection FROM memories ORDER BY collection")]


def consolidate_ended(
    db: Store, engine: RecallEngine, settings: Settings, collection: str | None, now: float, *,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Every ended session of ``collection`` (None: all), oldest first, then decay; ``engine``'s fact
    mirror (kept for the process, caught up before each plan) finds earlier facts, as end_session's."""
    sessions = _ended_sessions(db, collection)
    totals: dict[str, int] = {"sessions": len(sessions), "memories": 0, "perceptions": 0,
                              "merged": 0, "reinforced": 0, "decayed": 0, "archived": 0}
    if progress is not None:
        progress(0, len(sessions))
    for done, (session_id, coll, ended_at, score) in enumerate(sessions, 1):
        with db.read() as conn:
            mirror = engine.vector_mirror(conn, coll, settings.model_id, settings.dim)
            plan = plan_session(conn, session_id, coll, ended_at, settings, mirror)
        with db.write() as conn:
            if score is not None:
                attach_outcome(conn, session_id, score, now)
            merges = apply_plan(conn, plan, now, settings)
            facts, perceptions = db.session_counts(conn, session_id)
        totals["memories"] += facts
        totals["perceptions"] += perceptions
        totals["merged"] += merges.merged
        totals["reinforced"] += merges.reinforced
        if progress is not None:
            progress(done, len(sessions))
    with db.write() as conn:
        for coll in _collections(db, collection):
            decay = decay_pass(conn, coll, now, half_life_s=settings.half_life_s, floor=settings.archive_floor)
            totals["decayed"] += decay.decayed
            totals["archived"] += decay.archived
    return {"collection": collection, **totals}
