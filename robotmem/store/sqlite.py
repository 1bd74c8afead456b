"""The embedded store: one SQLite file (the first implementation of robotmem.store.backend.Store)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import apsw

from ..errors import StorageError
from . import memories, purge, sessions, stats
from .connection import Database, scalar
from .migrations import SCHEMA_VERSION, migrate_step
from .paging import Progress
from .rows import hits_sql

__all__ = ["MIGRATION_WAIT_S", "SqliteStore"]

T = TypeVar("T")

log = logging.getLogger(__name__)

#: How long opening an out-of-date store waits for another process that holds its write lock,
#: most likely migrating it: migration 16 rewrote a store of 1,000,000 memories in 9.3 s on two
#: cores, close to the 10 s busy timeout, and a slower board takes longer.
MIGRATION_WAIT_S = 900.0


def refuse_foreign(conn: apsw.Connection, path: Path) -> None:
    """Another application's SQLite file is not turned into a memory store: a wrong path would
    otherwise get robotmem's tables, its user_version and WAL mode written into it."""
    tables = {name for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'")}
    ours = int(scalar(conn, "PRAGMA user_version")) > 0 and {"memories", "sessions"} <= tables
    if tables and not ours:
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise StorageError(f"cannot open the memory store at {path}: the file is not a robotmem database "
                           f"(it holds tables robotmem did not create: {shown}); check the path",
                           advice="the file is not a robotmem database; check the path")


class SqliteStore(Database):
    kind = "sqlite"

    def __init__(self, path: Path, *, busy_timeout_ms: int = 10_000) -> None:
        super().__init__(path, busy_timeout_ms=busy_timeout_ms, check_file=refuse_foreign)

    @property
    def location(self) -> str:
        return str(self.path)

    def run_write(self, body: Callable[[Any], T]) -> T:
        # BEGIN IMMEDIATE queues writers on the busy timeout: nothing to retry.
        with self.write() as conn:
            return body(conn)

    def migrate(self) -> int:
        """Bring the schema up to date. An up-to-date store is only read: opening it does not wait
        for another process's write."""
        if self.schema_version() == SCHEMA_VERSION:
            return SCHEMA_VERSION
        deadline = time.monotonic() + MIGRATION_WAIT_S
        warned = False
        progress: Progress | None = None
        while progress is None or progress != Progress(SCHEMA_VERSION):
            # A transaction a step, and a page of a Paged step: what is committed survives a kill,
            # and the WAL and the lock are held for one page, not the whole upgrade.
            try:
                with self.write() as conn:
                    progress = migrate_step(conn, progress)
                deadline = time.monotonic() + MIGRATION_WAIT_S
            except StorageError as exc:
                if not isinstance(exc.__cause__, apsw.BusyError) or time.monotonic() > deadline:
                    raise
                if not warned:
                    log.warning("%s: the schema is out of date and another process holds the write lock "
                                "(migrating it, most likely); waiting up to %.0f s", self.path, MIGRATION_WAIT_S)
                    warned = True
        return SCHEMA_VERSION

    def schema_version(self) -> int:
        return int(scalar(self.connection(), "PRAGMA user_version"))

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def restart_ids(self) -> None:
        """Nothing to do: AUTOINCREMENT continues after the largest id inserted."""

    def prepare_vectors(self, model_id: str, dim: int) -> None:
        """Nothing to prepare: the in-process vector index is built on first use."""

    def build_vector_indexes(self, *, force: bool = False, stale: bool = False) -> list[dict[str, Any]]:
        """None in the database: the memory-mapped vector files are the search layer's (search.ann_index)."""
        return []

    def vector_index_states(self, conn: Any, collection: str | None) -> list[dict[str, Any]]:
        """None in the database: the search layer reports its vector files (search.ann_index.snapshot_states)."""
        return []

    insert_memory = staticmethod(memories.insert_memory)
    insert_payload = staticmethod(memories.insert_payload)
    insert_memories = staticmethod(memories.insert_memories)
    put_embeddings = staticmethod(memories.put_embeddings)
    put_embedding = staticmethod(memories.put_embedding)
    find_duplicate = staticmethod(memories.find_duplicate)
    lock_live_contents = staticmethod(memories.lock_live_contents)
    reinforce = staticmethod(memories.reinforce)
    fetch_row = staticmethod(memories.fetch_row)
    fetch_payloads = staticmethod(memories.fetch_payloads)
    mark_forgotten = staticmethod(memories.mark_forgotten)
    replace_content = staticmethod(memories.replace_content)
    flush_access_counts = staticmethod(memories.flush_access_counts)
    insert_session = staticmethod(sessions.insert_session)
    get_session = staticmethod(sessions.get_session)
    list_sessions = staticmethod(sessions.list_sessions)
    close_session = staticmethod(sessions.close_session)
    session_counts = staticmethod(sessions.session_counts)
    session_overviews = staticmethod(sessions.session_overviews)
    store_stats = staticmethod(stats.store_stats)
    purge_page = staticmethod(purge.purge_sqlite_page)
    count_purgeable = staticmethod(purge.count_purgeable)
    ids_by_uid = staticmethod(memories.ids_by_uid)
    adopt_uid = staticmethod(memories.adopt_uid)
    insert_row = staticmethod(memories.insert_row)
    iter_rows = staticmethod(memories.iter_rows)
    insert_session_row = staticmethod(sessions.insert_session_row)
    all_sessions = staticmethod(sessions.all_sessions)

    def after_purge(self) -> list[str]:
        return []  # SQLite reuses the freed pages of every table and index for the next writes

    @staticmethod
    def lock_session(conn: apsw.Connection, session_id: str) -> None:
        """Nothing to lock: BEGIN IMMEDIATE already makes writers take turns."""

    @staticmethod
    def lock_memory(conn: apsw.Connection, memory_id: int) -> None:
        """Nothing to lock: BEGIN IMMEDIATE already makes writers take turns."""

    @staticmethod
    def delete_embedding(conn: apsw.Connection, memory_id: int) -> None:
        conn.execute("DELETE FROM embeddings WHERE memory_id = ?", (memory_id,))

    @staticmethod
    def fetch_rows(conn: apsw.Connection, memory_ids: list[int]) -> list[tuple[Any, ...]]:
        q, p = hits_sql(json.dumps(memory_ids))
        return [tuple(r) for r in conn.execute(q, p)]
