"""The recall engine for a store, chosen by its kind.

Its own module so that the orchestration (robotmem.search.recall) and the PostgreSQL
steps that subclass it (robotmem.search.postgres) import each other in one direction only.
PostgreSQL's engine is imported when a PostgreSQL store asks for it: its driver (psycopg)
took 110 ms of every start of the command line on an embedded store.
"""

from __future__ import annotations

from typing import Any

from .recall import RecallEngine

__all__ = ["recall_engine_for"]


def recall_engine_for(store: Any, *, half_life_s: float) -> RecallEngine:
    """The recall engine for a store: SQLite's (FTS5, vector mirror and ANN files) or PostgreSQL's."""
    if getattr(store, "kind", "sqlite") == "postgresql":
        from .postgres import PgRecallEngine

        return PgRecallEngine(store, half_life_s=half_life_s)
    return RecallEngine(store, half_life_s=half_life_s)
