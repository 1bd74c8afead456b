"""The recall engine for a store, chosen by its kind.

Its own module so that the orchestration (robotmem.search.recall) and the PostgreSQL
steps that subclass it (robotmem.search.postgres) import each other in one direction only.
"""

from __future__ import annotations

from typing import Any

from .postgres import PgRecallEngine
from .recall import RecallEngine

__all__ = ["recall_engine_for"]


def recall_engine_for(store: Any, *, half_life_s: float) -> RecallEngine:
    """The recall engine for a store: SQLite's (FTS5, vector mirror and ANN files) or PostgreSQL's."""
    if getattr(store, "kind", "sqlite") == "postgresql":
        return PgRecallEngine(store, half_life_s=half_life_s)
    return RecallEngine(store, half_life_s=half_life_s)
