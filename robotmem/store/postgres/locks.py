"""The advisory locks a PostgreSQL store takes while it changes its tables' shape.

Each schema of a database is a store of its own (docs/fleet.md), so these locks are the store's:
one store's migration or index build, which can take minutes on a large store, does not hold up
another's opening or its first write into a collection. An older robotmem took them on keys
without the schema, database-wide, and while a fleet upgrades host by host both run against one
database. So each lock has two parts: the older key, shared, and the store's own key, exclusive.
New robotmems of two stores share the older key and go on; two of one store wait for each other on
the store's key; an older robotmem, which takes the older key exclusively, waits for every new
one, and they for it, as all did before.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["INDEX_BUILDING", "lock_index_build", "lock_migrations"]

#: The older database-wide keys: a migration ("rmem"), a (collection, model)'s index build ("rmvx").
_MIGRATION: Final = 0x726D656D
_INDEX: Final = 0x726D7678
#: The store's own keys, with ``hashtext`` of the schema (and the pair) as their second half.
_STORE_MIGRATION: Final = 0x726D7373
_STORE_INDEX: Final = 0x726D7369

_PAIR = "v.collection || E'\\n' || v.model_id"


def lock_migrations(conn: Any, *, database_wide: bool = False) -> None:
    """Wait until no other process migrates this store (nor an older robotmem any store of the
    database); ``database_wide``: until none migrates any, for what is not the store's own, such
    as creating the vector extension."""
    older = "pg_advisory_xact_lock" if database_wide else "pg_advisory_xact_lock_shared"
    conn.execute(f"SELECT {older}(?)", (_MIGRATION,))
    conn.execute("SELECT pg_advisory_xact_lock(?::int4, hashtext(current_schema()))", (_STORE_MIGRATION,))


def lock_index_build(conn: Any, collection: str, model_id: str) -> None:
    """Wait until no other process builds this store's index of (collection, model), nor an older
    robotmem that pair's index in any store of the database."""
    pair = f"{collection}\n{model_id}"
    conn.execute("SELECT pg_advisory_xact_lock_shared(?::int4, hashtext(?))", (_INDEX, pair))
    conn.execute("SELECT pg_advisory_xact_lock(?::int4, hashtext(current_schema() || E'\\n' || ?))",
                 (_STORE_INDEX, pair))


#: A condition on a row ``v`` of ``vector_indexes``: a process builds its index now. In this database
#: only (advisory locks are per database, pg_locks shows every database's).
INDEX_BUILDING: Final = (
    "EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.objsubid = 2 "
    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND ("
    f"(l.classid = {_STORE_INDEX} AND l.objid = hashtext(current_schema() || E'\\n' || {_PAIR})::oid) "
    f"OR (l.classid = {_INDEX} AND l.mode = 'ExclusiveLock' AND l.objid = hashtext({_PAIR})::oid)))"
)
