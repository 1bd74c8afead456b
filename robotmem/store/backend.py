"""The store seam: what the service, search and consolidation layers need from a database.

Two implementations: :class:`robotmem.store.sqlite.SqliteStore` (the embedded default,
one file) and :class:`robotmem.store.postgres.PgStore` (one PostgreSQL database shared
by a fleet). Callers open transactions with ``read()`` / ``write()`` and pass the
connection they get to the row operations below; statements that are the same in both
dialects may also be run on that connection directly with ``?`` placeholders.
SQL that differs between the stores lives behind this seam, never beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from ..config import is_postgres_url
from .claims import Release
from .pipeline import Later, PipelinedWrites

if TYPE_CHECKING:
    from .memories import NewMemory
    from .purge import PurgedPage, PurgeScope

__all__ = ["Store", "as_vector_bytes", "dialect_of", "open_store"]

T = TypeVar("T")


class Store(Protocol):
    #: "sqlite" or "postgresql"
    kind: str

    @property
    def location(self) -> str:
        """The file path, or the URL without its password."""

    def read(self) -> AbstractContextManager[Any]: ...
    def write(self, *, wait: bool = True) -> AbstractContextManager[Any]: ...
    def run_write(self, body: Callable[[Any], T]) -> T: ...
    def pipelined_writes(self) -> PipelinedWrites:
        """Write transactions on a connection of their own, committed on a worker thread (bulk loads)."""
    def claim(self, name: str) -> Release | str:
        """Hold ``name`` against every other process using this store until the release is called or
        the process ends (robotmem.store.claims); when another holds it: who, as text. Never waits."""
    def migrate(self) -> int: ...
    def schema_version(self) -> int:
        """The store's schema version, read without writing (0: no robotmem tables yet)."""
    def close(self) -> None: ...
    def __enter__(self) -> Store: ...
    def __exit__(self, *exc: object) -> None: ...
    def prepare_vectors(self, model_id: str, dim: int) -> None: ...
    def build_vector_indexes(self, *, force: bool = False, stale: bool = False) -> list[dict[str, Any]]:
        """Indexes the database keeps itself that bulk loads left to build (``stale``: and those built by
        an older robotmem to rebuild; ``force``: all); what was built."""
    def vector_index_states(self, conn: Any, collection: str | None) -> list[dict[str, Any]]:
        """Indexes the database keeps itself: collection, model_id, kind, vectors, built, stale, building."""

    # memories
    def insert_memory(self, conn: Any, m: NewMemory) -> int | None: ...
    def insert_memories(self, conn: Any, items: list[NewMemory], *, later: Later | None = None) -> list[int]:
        """Many perceptions at once (facts go through insert_memory, which may find a duplicate).
        ``later``: where to leave the statements that need no Python (robotmem.store.pipeline)."""
    def put_embeddings(self, conn: Any, rows: list[tuple[int, str, str, np.ndarray]], *,
                       bulk: bool = False) -> None:
        """Many (memory id, collection, model id, vector) at once; ``bulk``: part of a load whose
        caller runs build_vector_indexes at its end."""
    def purge_page(self, conn: Any, scope: PurgeScope, limit: int) -> PurgedPage:
        """Inside a write: delete every row of the oldest ``limit`` memories ``scope`` takes
        (robotmem.store.purge): how many it took, and where the next page starts."""
    def count_purgeable(self, conn: Any, scope: PurgeScope) -> int:
        """How many memories a purge of ``scope`` would take now."""
    def after_purge(self) -> list[str]:
        """Outside any transaction, after a purge took memories: give back what the store does not
        reuse by itself; the names of the indexes rebuilt."""
    def insert_payload(self, conn: Any, memory_id: int, blob: bytes, summary: dict[str, Any]) -> None: ...
    def put_embedding(self, conn: Any, memory_id: int, collection: str, model_id: str,
                      vector: np.ndarray) -> None: ...
    def delete_embedding(self, conn: Any, memory_id: int) -> None: ...
    def find_duplicate(self, conn: Any, collection: str, content_hash: str) -> int | None: ...
    def reinforce(self, conn: Any, memory_id: int, now: float, *, step: float, ceiling: float,
                  half_life_s: float, fresh: float, evidence: int = 1) -> None:
        """``min(ceiling, max(decayed, fresh) + step * evidence)``; ``reinforced_at`` never moves back."""
    def fetch_row(self, conn: Any, memory_id: int) -> tuple[Any, ...] | None: ...
    def fetch_rows(self, conn: Any, memory_ids: list[int]) -> list[tuple[Any, ...]]: ...
    def fetch_payloads(self, conn: Any, memory_ids: list[int]) -> dict[int, bytes | None]:
        """``{id: payload blob or None}`` for each id that names a memory; unknown ids are absent."""
    def mark_forgotten(self, conn: Any, memory_id: int, reason: str, now: float) -> None: ...
    def replace_content(self, conn: Any, memory_id: int, *, content: str, search_text: str,
                        context: dict[str, Any], content_hash: str, protected: bool, now: float) -> None: ...
    def flush_access_counts(self, conn: Any, counts: dict[int, int], now: float) -> None: ...
    def lock_memory(self, conn: Any, memory_id: int) -> None:
        """Inside a write: hold the memory's row until commit, so a check of it made next stays true
        until this transaction ends (SQLite: the write lock already holds every row)."""
    def lock_live_contents(self, conn: Any, memory_ids: list[int]) -> dict[int, str]:
        """Inside a write: ``{id: content}`` of those of the memories that are active or archived,
        their rows held until commit (PostgreSQL: shared locks, in id order)."""

    # sessions and statistics
    def insert_session(self, conn: Any, session_id: str, collection: str, context_json: str, now: float) -> bool:
        """Whether it inserted the session; False when one with that id exists, committed by another
        writer too (PostgreSQL waits for a concurrent insert of the id to end): nothing written."""
    def get_session(self, conn: Any, session_id: str) -> dict[str, Any] | None: ...
    def lock_session(self, conn: Any, session_id: str) -> None:
        """Inside a write: hold the session's row until commit (a second end_session waits, then sees it ended)."""
    def list_sessions(self, conn: Any, collection: str | None, status: str | None, limit: int | None,
                      after: tuple[float, str] | None = None, robot: str | None = None) -> list[dict[str, Any]]:
        """Newest first (started_at DESC, id); ``after``: the (started_at, id) a page ended on;
        ``robot``: the context's robot.id."""
    def close_session(self, conn: Any, session_id: str, now: float, score: float | None,
                      summary: dict[str, Any]) -> None: ...
    def session_counts(self, conn: Any, session_id: str) -> tuple[int, int]: ...
    def session_overviews(self, conn: Any, session_ids: list[str], counts: bool = True) -> dict[str, dict[str, Any]]:
        """Per session: active ``facts`` and ``perceptions`` (None unless ``counts``), and
        ``summary_id`` (robotmem.store.sessions)."""
    def store_stats(self, conn: Any, collection: str | None) -> dict[str, Any]: ...

    # whole rows (export, import, migrate)
    def insert_row(self, conn: Any, r: dict[str, Any], *, keep_id: bool = False) -> int | None: ...
    def iter_rows(self, conn: Any, after_id: int, limit: int) -> list[dict[str, Any]]: ...
    def ids_by_uid(self, conn: Any, uids: list[str]) -> dict[str, int]:
        """``{uid: memory id}`` of those of ``uids`` the store holds (import matches records by uid)."""
    def adopt_uid(self, conn: Any, memory_id: int, provisional: str, uid: str) -> bool:
        """Give the memory ``uid`` if it still has the ``provisional`` uid a reader saw and no memory
        has ``uid``; whether it took it (import: a newer export's record names a row older than uids)."""
    def insert_session_row(self, conn: Any, r: dict[str, Any]) -> bool: ...
    def restart_ids(self) -> None:
        """After rows were copied with their ids: new memories get ids after the largest."""
    def all_sessions(self, conn: Any) -> list[dict[str, Any]]: ...


def dialect_of(conn: Any) -> str:
    """"postgresql" for a connection of the PostgreSQL store, else "sqlite" (an apsw connection)."""
    return str(getattr(conn, "dialect", "sqlite"))


def as_vector_bytes(value: Any) -> bytes | None:
    """A stored vector as float32 bytes (SQLite keeps bytes; pgvector hands back a Vector)."""
    from .memories import _vector_bytes

    return None if value is None else _vector_bytes(value)


def open_store(location: str | Path, *, busy_timeout_ms: int = 10_000) -> Store:
    """A PostgreSQL URL opens the PostgreSQL store; anything else is a SQLite file path."""
    if is_postgres_url(location):
        from .postgres import PgStore

        return PgStore(str(location))
    from .sqlite import SqliteStore

    return SqliteStore(Path(location), busy_timeout_ms=busy_timeout_ms)
