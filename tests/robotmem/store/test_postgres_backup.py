"""docs/fleet.md "Backups", the commands as written there, with the PostgreSQL tools of the server
the tests run (pgserver's), against a real store: the restored store opens, recalls through its
vector index, and new memories get the ids after the largest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from robotmem import Memory

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "search"))
from given_vectors import GivenVectors  # noqa: E402

_DB = "robotmem"


def _admin(url: str, database: str = "postgres") -> Any:
    import psycopg

    return psycopg.connect(urlsplit(url)._replace(path="/" + database).geturl(), autocommit=True)


def _shell(command: str, cwd: Path, server_url: str, user: str) -> subprocess.CompletedProcess[str]:
    """A docs command, run by the shell with the server named by libpq's environment (PGHOST...)."""
    pgserver = pytest.importorskip("pgserver")
    parts = urlsplit(server_url)
    host = parse_qs(parts.query).get("host", [parts.hostname or ""])[0]
    env = dict(os.environ, PGHOST=host, PGPORT=str(parts.port or 5432), PGUSER=user,
               PATH=f"{Path(pgserver.__file__).parent / 'pginstall' / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _fresh(server_url: str, owner: str) -> None:
    with _admin(server_url) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {_DB} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {_DB} OWNER {owner}")


@pytest.mark.parametrize("as_owner", [False, True], ids=["superuser", "database_owner"])
def test_a_store_restored_as_the_docs_say_opens_recalls_and_continues_its_ids(
        postgres_server_url: str, tmp_path: Path, as_owner: bool):
    user = "robotmem_backup_owner" if as_owner else urlsplit(postgres_server_url).username or "postgres"
    with _admin(postgres_server_url) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {_DB} WITH (FORCE)")
        admin.execute("DROP ROLE IF EXISTS robotmem_backup_owner")
        admin.execute("CREATE ROLE robotmem_backup_owner LOGIN")
    _fresh(postgres_server_url, user)
    with _admin(postgres_server_url, _DB) as admin:
        admin.execute("CREATE EXTENSION vector")
    parts = urlsplit(postgres_server_url)
    url = parts._replace(netloc=f"{user}@{parts.netloc.rpartition('@')[2]}", path="/" + _DB).geturl()
    with Memory(url=url, embedder=GivenVectors(), collection="arm") as mem:
        ids = [mem.learn(f"the arm reached shelf {i}")["memory_id"] for i in range(5)]
    dumped = _shell("pg_dump -Fc robotmem > robotmem.dump", tmp_path, postgres_server_url, user)
    assert dumped.returncode == 0, dumped.stderr
    _fresh(postgres_server_url, user)
    if as_owner:  # a managed PostgreSQL: the superuser enables pgvector, the owner restores
        with _admin(postgres_server_url, _DB) as admin:
            admin.execute("CREATE EXTENSION vector")
        plain = _shell("pg_restore -d robotmem robotmem.dump", tmp_path, postgres_server_url, user)
        assert plain.returncode == 1 and "must be owner of extension vector" in plain.stderr, plain.stderr
        assert "errors ignored on restore: 1" in plain.stderr
        _fresh(postgres_server_url, user)
        with _admin(postgres_server_url, _DB) as admin:
            admin.execute("CREATE EXTENSION vector")
        restored = _shell("pg_restore -l robotmem.dump | grep -v ' EXTENSION ' > robotmem.list && "
                          "pg_restore -L robotmem.list -d robotmem robotmem.dump", tmp_path, postgres_server_url, user)
    else:
        restored = _shell("pg_restore -d robotmem robotmem.dump", tmp_path, postgres_server_url, user)
    assert restored.returncode == 0, restored.stderr
    with Memory(url=url, embedder=GivenVectors(), collection="arm") as mem:
        assert [h["id"] for h in mem.recall("the arm reached shelf 3", n=1)["results"]] == [ids[3]]
        (index,) = mem.stats()["vector_indexes"]
        assert index["built"] and index["vectors"] == 5
        assert mem.learn("written after the restore")["memory_id"] == ids[-1] + 1
    with _admin(postgres_server_url, _DB) as admin:
        assert len(admin.execute("SELECT 1 FROM pg_indexes WHERE indexname LIKE 'embeddings_hnsw%'").fetchall()) == 1
    with _admin(postgres_server_url) as admin:
        admin.execute(f"DROP DATABASE {_DB} WITH (FORCE)")
        admin.execute("DROP ROLE robotmem_backup_owner")
