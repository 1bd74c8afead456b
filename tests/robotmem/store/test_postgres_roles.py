"""A least-privilege role, as a DBA gives the robots of a fleet: USAGE on the store's schema and
SELECT/INSERT/UPDATE/DELETE on its tables (USAGE, SELECT on its sequence), no CREATE, not the owner."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from robotmem import Memory, StorageError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "search"))
from given_vectors import GivenVectors  # noqa: E402

_ROLE = "robotmem_rows_only"


def _admin(url: str) -> Any:
    import psycopg

    return psycopg.connect(url, autocommit=True)


@pytest.fixture
def rows_only(postgres_url: str) -> Iterator[str]:
    """The URL of postgres_url's store (created here by the owner, up to date) as the least-privilege role."""
    with Memory(url=postgres_url, embedder=GivenVectors(), collection="seeded") as owner:
        owner.learn("the owner's first fact")
    with _admin(postgres_url) as admin:
        schema = admin.execute("SELECT current_schema()").fetchone()[0]
        admin.execute(f"DROP ROLE IF EXISTS {_ROLE}")
        admin.execute(f"CREATE ROLE {_ROLE} LOGIN")
        admin.execute(f"GRANT USAGE ON SCHEMA {schema} TO {_ROLE}")
        admin.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {_ROLE}")
        admin.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO {_ROLE}")
    parts = urlsplit(postgres_url)
    yield parts._replace(netloc=_ROLE + "@" + parts.netloc.rpartition("@")[2]).geturl()
    with _admin(postgres_url) as admin:
        admin.execute(f"DROP OWNED BY {_ROLE}")
        admin.execute(f"DROP ROLE {_ROLE}")


def test_a_role_that_may_only_write_rows_learns_into_a_new_collection(postgres_url: str, rows_only: str):
    """Before: the first write with a vector into a new collection built its HNSW index, which only the
    table's owner may: "must be owner of table embeddings", for a learn and for a small batch alike."""
    with Memory(url=rows_only, embedder=GivenVectors(), collection="arm") as robot:
        first = robot.learn("the left gripper slips on wet glass")["memory_id"]
        batch = robot.save_perceptions([{"description": f"the arm reached shelf {i}", "perception_type": "visual"}
                                        for i in range(3)])
        assert [h["id"] for h in robot.recall("gripper slips on glass", n=1)["results"]] == [first]
        assert len(batch) == 3
        with pytest.raises(StorageError) as info:  # an explicit reindex says who may
            robot.reindex()
        assert "run `robotmem reindex` as the owner" in info.value.message and not info.value.transient
    with Memory(url=postgres_url, embedder=GivenVectors(), collection="arm") as owner:
        built = owner.reindex()["vector_indexes"]
        assert [(b["collection"], b["rows"]) for b in built] == [("arm", 4)]
        assert [h["id"] for h in owner.recall("gripper slips on glass", n=1)["results"]] == [first]


def test_a_role_that_may_only_write_rows_is_told_who_must_upgrade_an_outdated_store(postgres_url: str,
                                                                                    rows_only: str):
    from robotmem.store.postgres.migrations import SCHEMA_VERSION

    with _admin(postgres_url) as admin:  # the store as an older robotmem left it
        admin.execute("DELETE FROM robotmem_schema WHERE version = %s", (SCHEMA_VERSION,))
    with pytest.raises(StorageError) as info:
        Memory(url=rows_only, embedder=None)
    message = info.value.message
    assert f"from schema version {SCHEMA_VERSION - 1} to {SCHEMA_VERSION}" in message, message
    assert "permission denied" in message and "open it once so" in message
    assert not info.value.transient


def test_a_read_only_role_is_told_who_must_upgrade_an_outdated_store(postgres_url: str, rows_only: str):
    """As a hot standby answers: before, 'cannot execute CREATE TABLE in a read-only transaction'."""
    from robotmem.store.postgres.migrations import SCHEMA_VERSION

    with _admin(postgres_url) as admin:
        admin.execute("DELETE FROM robotmem_schema WHERE version = %s", (SCHEMA_VERSION,))
        admin.execute(f"ALTER ROLE {_ROLE} SET default_transaction_read_only = on")
    with pytest.raises(StorageError) as info:
        Memory(url=rows_only, embedder=None)
    message = info.value.message
    assert f"from schema version {SCHEMA_VERSION - 1} to {SCHEMA_VERSION}" in message, message
    assert "read-only transaction" in message and "not a hot standby" in message and not info.value.transient


def test_a_role_that_may_only_write_rows_purges_and_is_told_the_index_was_not_rebuilt(
        rows_only: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    """Only the owner may REINDEX: the purge still deletes, and logs which index keeps the purged keys."""
    from robotmem.store import postgres

    monkeypatch.setattr(postgres, "GIN_REBUILD_RATIO", 0.0)
    monkeypatch.setattr(postgres, "GIN_REBUILD_MIN_BYTES", 0)
    with Memory(url=rows_only, embedder=GivenVectors(), collection="arm") as robot:
        robot.save_perceptions([{"description": f"the arm reached shelf {i}", "occurred_at": 1_000 + i}
                                for i in range(3)])
        with caplog.at_level("WARNING", logger="robotmem.store.postgres"):
            assert robot.purge_perceptions(2_000)["purged"] == 3
        assert robot.stats()["perceptions"] == 0
    assert "could not rebuild index memories_context" in caplog.text and "must be owner" in caplog.text
