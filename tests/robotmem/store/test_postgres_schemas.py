"""Two robotmem stores in one PostgreSQL database, one per schema, chosen by each role's search_path
(``ALTER ROLE ... SET search_path = b, public``, as docs/fleet.md recommends behind pgbouncer; pgvector
lives in public). Each store keeps to its own schema."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from robotmem import Memory, StorageError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "search"))
from given_vectors import GivenVectors  # noqa: E402

_DB = "robotmem_schemas"


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
