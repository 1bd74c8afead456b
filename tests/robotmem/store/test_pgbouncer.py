"""A fleet's PostgreSQL behind pgbouncer in transaction mode, the pooler many fleets put in front
of it so that hundreds of robot processes share a few server connections.

pgbouncer hands a client a server connection per transaction, so anything a client leaves on its
server connection between transactions lands with another client. Measured before these tests:
8 threads of one process through a pool of 3 server connections, 7 failed (psycopg's prepared
statement "_pg3_0" already existed, or a COMMIT was bound to another client's 3-parameter
statement), and a replay's claim stayed held after it ended (a session-level advisory lock left
on the pooled server connection).

The real pgbouncer (Debian's package; CI installs it) runs in front of the tests' real server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from robotmem import Memory
from robotmem.errors import ConflictError

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from bench_pgbouncer import PGBOUNCER, pgbouncer_in_front  # noqa: E402


@pytest.fixture(scope="module")
def pgbouncer(postgres_server_url: str) -> Iterator[dict[str, Any]]:
    """pgbouncer in transaction mode with 2 server connections, in front of the tests' server."""
    if PGBOUNCER is None:
        message = "pgbouncer tests need Debian's pgbouncer (apt-get install pgbouncer)"
        if os.environ.get("CI"):
            pytest.fail(message + "; .ci/run installs it")
        pytest.skip(message)
    with pgbouncer_in_front(postgres_server_url, pool_size=2) as pooled:
        yield {"url": pooled, "server_url": postgres_server_url}


_databases = iter(range(1, 1_000_000))


@pytest.fixture
def pooled_url(pgbouncer: dict[str, Any]) -> Iterator[str]:
    """A fresh database of the tests' server, reached through pgbouncer (pgbouncer passes no
    search_path option, so each test gets a database rather than a schema)."""
    import psycopg

    name = f"bouncer{os.getpid()}_{next(_databases)}"
    with psycopg.connect(pgbouncer["server_url"], autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    direct = _database_url(pgbouncer["server_url"], name)
    with psycopg.connect(direct, autocommit=True) as admin:
        admin.execute("CREATE EXTENSION IF NOT EXISTS vector")
    yield pgbouncer["url"] + name
    with psycopg.connect(pgbouncer["server_url"], autocommit=True) as admin:
        admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


def _database_url(url: str, database: str) -> str:
    from psycopg.conninfo import make_conninfo

    return make_conninfo(url, dbname=database)


def _direct(pgbouncer: dict[str, Any], pooled: str) -> Any:
    import psycopg

    return psycopg.connect(_database_url(pgbouncer["server_url"], pooled.rsplit("/", 1)[1]), autocommit=True)


def test_many_threads_share_two_server_connections_without_a_failed_call(pooled_url: str, pgbouncer: dict[str, Any]):
    errors: list[str] = []
    with Memory(url=pooled_url, embedder=None) as mem:
        session = mem.start_session(context={"robot": {"id": "arm-1"}, "task": {"name": "pick"}})

        def work(k: int) -> None:
            try:
                for i in range(25):
                    mem.save_perception(f"wrist force sample {k} number {i}", "tactile", session_id=session["session_id"])
                    mem.learn(f"grip force {i} N held bottle {k}", session_id=session["session_id"])
                    mem.recall(f"grip force bottle {i}", n=3)
            except Exception as exc:  # noqa: BLE001 - every failure is the finding
                errors.append(repr(exc)[:300])

        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        ended = mem.end_session(session["session_id"], outcome_score=0.9)
        assert ended["status"] == "ended"
    with _direct(pgbouncer, pooled_url) as direct:  # the oracle: the rows, read past the pooler
        counts = dict(direct.execute("SELECT coalesce(perception_type, type), count(*) FROM memories"
                                     " WHERE session_id = %s GROUP BY 1", (session["session_id"],)).fetchall())
    assert counts["tactile"] == counts["fact"] == 8 * 25  # every row, whatever consolidation made of it


def test_a_claim_ends_with_its_holder_and_holds_meanwhile(pooled_url: str, pgbouncer: dict[str, Any]):
    with Memory(url=pooled_url, embedder=None) as mem, Memory(url=pooled_url, embedder=None) as other:
        with mem.exclusive("replay of bag 7"):
            with pytest.raises(ConflictError):
                with other.exclusive("replay of bag 7"):
                    pass
        with _direct(pgbouncer, pooled_url) as direct:
            held = direct.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone()
        assert held == (0,)  # a session-level lock stayed on the pooled server connection
        with other.exclusive("replay of bag 7"):
            pass


def test_a_claim_whose_holder_is_killed_is_free_again(pooled_url: str, tmp_path: Path):
    """A replay killed with its claim: pgbouncer closes the server connection whose transaction
    the dead client left open, and the lock ends with it."""
    script = tmp_path / "holder.py"
    script.write_text(textwrap.dedent(f"""\
        import sys, time
        from robotmem import Memory
        mem = Memory(url={pooled_url!r}, embedder=None)
        claim = mem.exclusive("replay of bag 9")
        claim.__enter__()
        print("held", flush=True)
        time.sleep(600)
        """))
    holder = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with Memory(url=pooled_url, embedder=None) as mem:
            with pytest.raises(ConflictError):
                with mem.exclusive("replay of bag 9"):
                    pass
            holder.send_signal(signal.SIGKILL)
            holder.wait()
            for _ in range(200):  # the pooler notices the closed socket at once; allow it a moment
                try:
                    with mem.exclusive("replay of bag 9"):
                        break
                except ConflictError:
                    time.sleep(0.05)
            else:
                pytest.fail("the dead holder's claim was never released")
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
