"""The PostgreSQL + pgvector store: one database that a fleet of robots and servers shares.

``Memory(url="postgresql://user@host/db")`` (or ``ROBOTMEM_URL``) opens it; see docs/fleet.md.
psycopg 3 and pgvector-python (the ``postgres`` extra) are imported only here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from . import memories, sessions
from .connection import PgConnection, PgDatabase
from .migrations import migrate

__all__ = ["PgStore"]

T = TypeVar("T")


def _register_vector(conn: PgConnection) -> None:
    from pgvector.psycopg import register_vector

    try:
        register_vector(conn.raw)
    except Exception:  # the extension is not there yet: migrate() creates it, then we register again
        pass


class PgStore(PgDatabase):
    def __init__(self, url: str, *, connect_timeout_s: int = 5) -> None:
        super().__init__(url, connect_timeout_s=connect_timeout_s, on_connect=_register_vector)

    def migrate(self) -> int:
        version = self.run_write(migrate)
        _register_vector(self.connection())
        return version

    def __enter__(self) -> PgStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def restart_ids(self) -> None:
        self.run_write(memories.restart_ids)

    def prepare_vectors(self, model_id: str, dim: int) -> None:
        self.run_write(lambda conn: memories.ensure_vector_index(conn, model_id, dim))

    insert_memory = staticmethod(memories.insert_memory)
    insert_payload = staticmethod(memories.insert_payload)
    insert_memories = staticmethod(memories.insert_memories)
    put_embeddings = staticmethod(memories.put_embeddings)
    put_embedding = staticmethod(memories.put_embedding)
    delete_embedding = staticmethod(memories.delete_embedding)
    find_duplicate = staticmethod(memories.find_duplicate)
    reinforce = staticmethod(memories.reinforce)
    fetch_row = staticmethod(memories.fetch_row)
    fetch_rows = staticmethod(memories.fetch_rows)
    mark_forgotten = staticmethod(memories.mark_forgotten)
    replace_content = staticmethod(memories.replace_content)
    flush_access_counts = staticmethod(memories.flush_access_counts)
    insert_session = staticmethod(sessions.insert_session)
    get_session = staticmethod(sessions.get_session)
    lock_session = staticmethod(sessions.lock_session)
    list_sessions = staticmethod(sessions.list_sessions)
    close_session = staticmethod(sessions.close_session)
    session_counts = staticmethod(sessions.session_counts)
    store_stats = staticmethod(sessions.store_stats)
    insert_row = staticmethod(memories.insert_row)
    iter_rows = staticmethod(memories.iter_rows)
    insert_session_row = staticmethod(sessions.insert_session_row)
    all_sessions = staticmethod(sessions.all_sessions)
