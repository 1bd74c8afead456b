"""Two robotmem stores in one PostgreSQL database, one per schema, chosen by each role's search_path
(``ALTER ROLE ... SET search_path = b, public``, as docs/fleet.md recommends behind pgbouncer; pgvector
lives in public). Each store keeps to its own schema."""

from __future__ import annotations

import sys
import threading
from contextlib import ExitStack
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from robotmem import Memory, StorageError
from robotmem.store.postgres import PgStore
from robotmem.store.postgres.locks import lock_index_build, lock_migrations

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "search"))
from given_vectors import GivenVectors  # noqa: E402

_DB = "robotmem_schemas"
#: The database-wide advisory keys robotmem took before 2026-12-06 (a migration; an index build), as
#: an older robotmem of a fleet upgrading host by host still takes them.
_OLDER_MIGRATION = 0x726D656D
_OLDER_INDEX = 0x726D7678


def _admin(url: str):  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(url, autocommit=True)


def _as(url: str, user: str, database: str = _DB) -> str:
    parts = urlsplit(url)
    return parts._replace(netloc=user + "@" + parts.netloc.rpartition("@")[2], path="/" + database).geturl()


@pytest.fixture
def two_roles(postgres_server_url: str) -> Iterator[tuple[str, str, str]]:
    """(admin URL of a fresh database, URL of role store_a: its store in public, URL of role store_b:
    ``search_path = b, public``)."""
    with _admin(postgres_server_url) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {_DB} WITH (FORCE)")
        for role in ("store_a", "store_b"):
            admin.execute(f"DROP ROLE IF EXISTS {role}")
            admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"CREATE DATABASE {_DB}")
    db_admin = urlsplit(postgres_server_url)._replace(path="/" + _DB).geturl()
    with _admin(db_admin) as admin:
        admin.execute("CREATE EXTENSION vector")
        admin.execute("GRANT USAGE, CREATE ON SCHEMA public TO store_a")
        admin.execute("CREATE SCHEMA b AUTHORIZATION store_b")
        admin.execute("ALTER ROLE store_b SET search_path = b, public")
    yield db_admin, _as(postgres_server_url, "store_a"), _as(postgres_server_url, "store_b")
    with _admin(postgres_server_url) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {_DB} WITH (FORCE)")
        admin.execute("DROP ROLE store_a")
        admin.execute("DROP ROLE store_b")


def _rows(admin_url: str, schema: str) -> list[str]:
    with _admin(admin_url) as admin:
        if admin.execute("SELECT to_regclass(%s)", (f"{schema}.memories",)).fetchone()[0] is None:
            return []
        return [r[0] for r in admin.execute(f"SELECT content FROM {schema}.memories ORDER BY id")]


def _hnsw(admin_url: str) -> list[tuple[str, str]]:
    with _admin(admin_url) as admin:
        return admin.execute("SELECT schemaname, indexname FROM pg_indexes WHERE indexname LIKE 'embeddings_hnsw%' "
                             "ORDER BY 1").fetchall()


def test_a_store_in_its_own_schema_does_not_write_into_a_store_further_along_the_search_path(two_roles):
    """Before: store_b's first open found public's robotmem_schema through the search_path, took public's
    store for its own (up to date, nothing to create) and wrote its memory there (for a role granted
    public's tables; store_b here failed with 'permission denied for table robotmem_schema')."""
    admin_url, url_a, url_b = two_roles
    with _admin(admin_url) as admin:  # store_b may read public's store, as roles of one fleet often may
        admin.execute("ALTER DEFAULT PRIVILEGES FOR ROLE store_a IN SCHEMA public GRANT ALL ON TABLES TO store_b")
    with Memory(url=url_a, embedder=GivenVectors()) as a:
        a.learn("the left door sticks")
    with Memory(url=url_b, embedder=GivenVectors()) as b:
        b.learn("the conveyor stops at noon")
        assert [h["content"] for h in b.recall("left door")["results"]] == []
    assert _rows(admin_url, "public") == ["the left door sticks"]
    assert _rows(admin_url, "b") == ["the conveyor stops at noon"]


def test_building_a_vector_index_leaves_another_schemas_index_of_the_same_pair_alone(two_roles):
    """The index of a (collection, model) has the same name in every store; before, store_b's first
    build dropped it by that name unqualified, which found public's index (store_b had none yet), so
    store_a's recall lost its index while its bookkeeping still called it built."""
    admin_url, url_a, url_b = two_roles
    with Memory(url=url_a, embedder=GivenVectors()) as a:
        a.learn("the left door sticks")
    (public_index,) = _hnsw(admin_url)
    with Memory(url=url_b, embedder=GivenVectors()) as b:
        b.learn("the right door sticks")
    assert _hnsw(admin_url) == [("b", public_index[1]), public_index]


def test_a_search_path_naming_a_schema_that_does_not_exist_is_refused_naming_it(two_roles):
    """A DBA who set the role's search_path and forgot CREATE SCHEMA: before, the store silently went
    into public, shared with the store there."""
    admin_url, url_a, url_b = two_roles
    with _admin(admin_url) as admin:
        admin.execute("GRANT USAGE, CREATE ON SCHEMA public TO store_b")
        admin.execute("ALTER ROLE store_b SET search_path = fleet_c, public")
    with pytest.raises(StorageError) as info:
        Memory(url=url_b, embedder=None)
    assert "fleet_c" in info.value.message and "CREATE SCHEMA" in info.value.message
    assert _rows(admin_url, "public") == []


def test_a_status_changed_from_a_session_with_another_search_path_marks_its_own_stores_vector(two_roles):
    """The triggers that keep embeddings.searchable named the tables unqualified, resolved by the
    search_path of the session that fired them: a DBA's UPDATE of b.memories from a session with the
    default path marked public's memory of that id unsearchable (it left public's index) and b's not."""
    admin_url, url_a, url_b = two_roles
    with Memory(url=url_a, embedder=GivenVectors()) as a:
        a.learn("the left door sticks")
    with Memory(url=url_b, embedder=GivenVectors()) as b:
        b.learn("the conveyor stops at noon")
    with _admin(admin_url) as admin:
        admin.execute("UPDATE b.memories SET status = 'forgotten' WHERE id = 1")
        assert admin.execute("SELECT searchable FROM public.embeddings WHERE memory_id = 1").fetchone() == (True,)
        assert admin.execute("SELECT searchable FROM b.embeddings WHERE memory_id = 1").fetchone() == (False,)


def _waited(admin_url: str, work: Callable[[], object], release: Callable[[], None]) -> bool:
    """Whether ``work`` (in a thread) waited for an advisory lock before it finished; then ``release``
    the lock it may wait for, and see it finish."""
    done, failed = threading.Event(), []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # re-raised in the test's thread
            failed.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    with _admin(admin_url) as admin:
        waited = False
        while not waited and not done.wait(0.05):
            waited = bool(admin.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                        "AND NOT granted").fetchone()[0])
    release()
    thread.join()
    if failed:
        raise failed[0]
    return waited


def _open_and_learn(url: str, text: str) -> None:
    with Memory(url=url, embedder=GivenVectors()) as mem:
        mem.learn(text)


def test_a_store_migrating_does_not_hold_up_another_schemas_store(two_roles):
    """Migrations took one lock for the whole database: a slow migration of one store (a rehash of a
    large store takes minutes) held every other store of the database at its opening meanwhile."""
    admin_url, url_a, url_b = two_roles
    with PgStore(url_a) as a, ExitStack() as migrating:
        lock_migrations(migrating.enter_context(a.write()))
        assert not _waited(admin_url, lambda: _open_and_learn(url_b, "the conveyor stops at noon"), migrating.close)
    assert _rows(admin_url, "b") == ["the conveyor stops at noon"]


def test_an_older_robotmem_migrating_any_store_still_holds_up_a_new_one(two_roles):
    """While a fleet upgrades host by host, an older robotmem migrates under the database-wide key:
    a new one waits for it, as it did before, so two versions never run one migration at once."""
    admin_url, url_a, url_b = two_roles
    older = _admin(admin_url)
    older.execute("BEGIN")
    older.execute("SELECT pg_advisory_xact_lock(%s)", (_OLDER_MIGRATION,))
    assert _waited(admin_url, lambda: _open_and_learn(url_b, "the conveyor stops at noon"), older.close)
    assert _rows(admin_url, "b") == ["the conveyor stops at noon"]


def test_a_store_building_an_index_does_not_hold_up_another_schemas_first_write_of_that_pair(two_roles):
    """Index builds took a lock per (collection, model) for the whole database: store_b's first write
    into a collection waited while store_a built its index of the same pair (minutes on a large
    store), and store_b's stats called its own index "building"."""
    admin_url, url_a, url_b = two_roles
    with Memory(url=url_a, embedder=GivenVectors()) as a:
        a.learn("the left door sticks")
        with PgStore(url_a) as store, ExitStack() as building:
            lock_index_build(building.enter_context(store.write()), "default", GivenVectors.model_id)
            assert [i["building"] for i in a.stats()["vector_indexes"]] == [True]

            def first_write_of_b() -> None:
                with Memory(url=url_b, embedder=GivenVectors()) as b:
                    b.learn("the conveyor stops at noon")
                    assert [i["building"] for i in b.stats()["vector_indexes"]] == [False]

            assert not _waited(admin_url, first_write_of_b, building.close)
        assert [i["building"] for i in a.stats()["vector_indexes"]] == [False]
    assert [name for schema, name in _hnsw(admin_url) if schema == "b"]


def test_an_older_robotmem_building_the_pairs_index_still_holds_up_a_new_one(two_roles):
    admin_url, url_a, url_b = two_roles
    with Memory(url=url_b, embedder=GivenVectors()) as b:  # b's tables, so only the index build is left
        b.learn("the conveyor stops at noon", collection="arm")
    older = _admin(admin_url)
    older.execute("BEGIN")
    older.execute("SELECT pg_advisory_xact_lock(%s::int4, hashtext(%s))", (_OLDER_INDEX, f"default\n{GivenVectors.model_id}"))
    assert _waited(admin_url, lambda: _open_and_learn(url_b, "the belt slips"), older.close)
    assert _rows(admin_url, "b") == ["the conveyor stops at noon", "the belt slips"]
