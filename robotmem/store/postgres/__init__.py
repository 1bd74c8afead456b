"""The PostgreSQL + pgvector store: one database that a fleet of robots and servers shares.

``Memory(url="postgresql://user@host/db")`` (or ``ROBOTMEM_URL``) opens it; see docs/fleet.md.
psycopg 3 and pgvector-python (the ``postgres`` extra) are imported only here.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any, TypeVar

import psycopg

from ...errors import StorageError
from ..purge import count_purgeable
from ..sessions import session_overviews
from . import memories, sessions
from .connection import PgConnection, PgDatabase, _first_line
from ..paging import Progress
from .migrations import SCHEMA_VERSION, migrate_step, schema_version, store_schema

__all__ = ["PgStore"]

T = TypeVar("T")

log = logging.getLogger(__name__)

#: The GIN indexes of memories (migrations): full text and contexts.
GIN_INDEXES = ("memories_context", "memories_fulltext_live")
#: after_purge rebuilds a GIN index this many times larger than the memories table.
GIN_REBUILD_RATIO = 1.0
#: ... and never below this size: a small store's index (its pages of structure) outgrows its table.
GIN_REBUILD_MIN_BYTES = 1 << 20


def _register_vector(conn: PgConnection) -> None:
    from pgvector.psycopg import register_vector

    try:
        register_vector(conn.raw)
    except psycopg.ProgrammingError:  # the extension is not there yet: migrate() creates it, then we register again
        pass
    # Any other failure (the server's statement_timeout cancelling the type lookup, a lost connection)
    # fails the connection: kept unregistered, every write of a vector on it failed for good with
    # "cannot adapt type 'ndarray'".


def _may_not_migrate(found: int, schema: str, exc: StorageError) -> StorageError:
    """A role that may only read and write rows (no CREATE on the schema, not the tables' owner), as a
    DBA gives robots, or a read-only role or server, cannot create or upgrade the tables: say so, instead
    of the bare privilege or read-only error."""
    what = (f"creating the memory store's tables in schema {schema!r}" if found == 0 else
            f"upgrading the memory store in schema {schema!r} from schema version {found} to {SCHEMA_VERSION}")
    return StorageError(
        f"{what} needs a role that may change the schema (CREATE on the schema, and the owner of its tables "
        f"once they exist) on a server that takes writes (the primary, not a hot standby), and this connection "
        f"cannot ({exc.message}); open it once so, e.g. as the tables' owner (`robotmem --url ... stats`), then "
        "this role can use it", transient=False)


class PgStore(PgDatabase):
    def __init__(self, url: str, *, connect_timeout_s: int = 5) -> None:
        super().__init__(url, connect_timeout_s=connect_timeout_s, on_connect=_register_vector)

    def migrate(self) -> int:
        """Bring the schema up to date. An up-to-date store is only read (as SQLite's): a read
        replica or a read-only role, where any write transaction fails, can open it."""
        with self.read() as conn:
            found = schema_version(conn)
            if found == SCHEMA_VERSION:
                return SCHEMA_VERSION
            schema = store_schema(conn)
        progress: Progress | None = None
        while progress is None or progress != Progress(SCHEMA_VERSION):  # a transaction a step or page
            try:
                progress = self.run_write(functools.partial(migrate_step, progress=progress))
            except StorageError as exc:
                if isinstance(exc.__cause__, (psycopg.errors.InsufficientPrivilege, psycopg.errors.ReadOnlySqlTransaction)):
                    raise _may_not_migrate(found, schema, exc) from exc
                raise
        _register_vector(self.connection())  # the extension may be new: register its type now
        return SCHEMA_VERSION

    def schema_version(self) -> int:
        with self.read() as conn:
            return schema_version(conn)

    def __enter__(self) -> PgStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def restart_ids(self) -> None:
        self.run_write(memories.restart_ids)

    def prepare_vectors(self, model_id: str, dim: int) -> None:
        """Nothing to prepare: a (collection, model)'s index is made with its first vectors."""

    def build_vector_indexes(self, *, force: bool = False, stale: bool = False) -> list[dict[str, Any]]:
        """Build the HNSW indexes bulk loads left to build (``stale``: and rebuild those an older
        robotmem built with superseded and forgotten vectors; ``force``: rebuild every one), each in
        its own transaction; what was built, with its rows and seconds."""
        with self.read() as conn:
            pairs = memories.vector_index_pairs(conn, everything=force, stale=stale)
            if pairs and not memories.may_build_indexes(conn):
                message = (f"only the owner of table embeddings ({memories.embeddings_owner(conn)}) may build "
                           "vector indexes, not this role: run `robotmem reindex` as the owner (recall scans "
                           "the collections whose index is unbuilt exactly meanwhile)")
                if force or stale:  # asked for (reindex): say why nothing was built
                    raise StorageError(message, transient=False)
                log.warning(message)  # at the end of an import or a copy, whose rows are all stored
                return []
        built = []
        for collection, model_id, dim in pairs:
            t0 = time.perf_counter()

            def build(conn: PgConnection, c: str = collection, m: str = model_id, d: int = dim) -> int | None:
                if not memories.build_vector_index(conn, c, m, d, rebuild=force):
                    return None
                return memories.vector_count(conn, c, m)

            rows = self.run_write(build)
            if rows is not None:
                built.append({"collection": collection, "model_id": model_id, "rows": rows,
                              "seconds": round(time.perf_counter() - t0, 3)})
        if built:
            # Fresh statistics after a bulk load, or the planner, still counting an empty table,
            # prefers a scan to the index just built.
            self.run_write(lambda conn: conn.execute("ANALYZE memories, embeddings"))
        return built

    def after_purge(self) -> list[str]:
        """Rebuild (``REINDEX CONCURRENTLY``: writers go on) each GIN index grown larger than the
        memories table. GIN never removes a key (src/backend/access/gin/README in PostgreSQL), so a
        context value or a word that only purged memories held stays: with a point in each context,
        the context index grew by about 80 bytes per memory ever written, 1.0 to 7.2 MB in 40 days
        of 2,000 perceptions a day purged after 3, a fresh build of it holding 1.0 MB
        (docs/benchmarks.md). Larger than the table (heap and TOAST, whose freed space is reused)
        is several times its fresh size for ordinary contexts, so the rebuild comes once per that
        much growth, not after every purge. A role that does not own the table cannot rebuild: logged."""
        conn = self.connection()
        rebuilt = []
        for name in GIN_INDEXES:
            grown = conn.execute("SELECT pg_relation_size(to_regclass(?)) > greatest(?, ? * pg_table_size("
                                 "to_regclass('memories')))", (name, GIN_REBUILD_MIN_BYTES, GIN_REBUILD_RATIO)).fetchone()
            if not grown or not grown[0]:
                continue
            try:
                conn.execute(f"REINDEX INDEX CONCURRENTLY {name}")
            except psycopg.Error as exc:
                log.warning("the purge could not rebuild index %s, which keeps the purged memories' keys: %s",
                            name, _first_line(exc))
                continue
            rebuilt.append(name)
        return rebuilt

    insert_memory = staticmethod(memories.insert_memory)
    insert_payload = staticmethod(memories.insert_payload)
    insert_memories = staticmethod(memories.insert_memories)
    put_embeddings = staticmethod(memories.put_embeddings)
    put_embedding = staticmethod(memories.put_embedding)
    delete_embedding = staticmethod(memories.delete_embedding)
    purge_page = staticmethod(memories.purge_page)
    count_purgeable = staticmethod(count_purgeable)  # the same SQL as SQLite's
    lock_memory = staticmethod(memories.lock_memory)
    lock_live_contents = staticmethod(memories.lock_live_contents)
    find_duplicate = staticmethod(memories.find_duplicate)
    reinforce = staticmethod(memories.reinforce)
    fetch_row = staticmethod(memories.fetch_row)
    fetch_rows = staticmethod(memories.fetch_rows)
    fetch_payloads = staticmethod(memories.fetch_payloads)
    mark_forgotten = staticmethod(memories.mark_forgotten)
    replace_content = staticmethod(memories.replace_content)
    flush_access_counts = staticmethod(memories.flush_access_counts)
    insert_session = staticmethod(sessions.insert_session)
    get_session = staticmethod(sessions.get_session)
    lock_session = staticmethod(sessions.lock_session)
    list_sessions = staticmethod(sessions.list_sessions)
    close_session = staticmethod(sessions.close_session)
    session_counts = staticmethod(sessions.session_counts)
    session_overviews = staticmethod(session_overviews)  # the same SQL as SQLite's
    store_stats = staticmethod(sessions.store_stats)
    vector_index_states = staticmethod(memories.vector_index_states)
    ids_by_uid = staticmethod(memories.ids_by_uid)
    adopt_uid = staticmethod(memories.adopt_uid)
    insert_row = staticmethod(memories.insert_row)
    iter_rows = staticmethod(memories.iter_rows)
    insert_session_row = staticmethod(sessions.insert_session_row)
    all_sessions = staticmethod(sessions.all_sessions)
