"""end_session: close the episode and consolidate it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError
from ..store import sessions as sstore
from ..store.connection import Database

if TYPE_CHECKING:
    from ..service import Memory

__all__ = ["end_session"]


def end_session(memory: "Memory", db: Database, session_id: str, score: float | None, now: float) -> dict[str, Any]:
    with db.write() as conn:
        session = sstore.get_session(conn, session_id)
        if session is None:
            raise NotFoundError(f"no session {session_id!r}", field="session_id")
        if session["status"] == "ended":
            return {**(session["summary"] or {}), "status": "already_ended"}
        facts, perceptions = sstore.session_counts(conn, session_id)
        summary: dict[str, Any] = {
            "session_id": session_id,
            "status": "ended",
            "collection": session["collection"],
            "outcome_score": score,
            "duration_s": round(max(0.0, now - session["started_at"]), 3),
            "memories": facts,
            "perceptions": perceptions,
            "merged": 0,
            "reinforced": 0,
            "decayed": 0,
            "archived": 0,
            "related": [],
        }
        sstore.close_session(conn, session_id, now, score, summary)
    return summary
