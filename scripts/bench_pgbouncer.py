"""PostgreSQL store: direct, direct with psycopg's prepared statements, and behind pgbouncer.

robotmem turns psycopg's server-side prepared statements off (prepare_threshold=None) so that a
pooler in transaction mode works (docs/fleet.md, "Behind a connection pooler"). This measures
what that costs, and what the pooler's extra hop costs, with the real model, on one fresh
server, the three ways alternating in rounds in one process:

    python scripts/bench_pgbouncer.py --rounds 5 --writes 150 --recalls 60

Needs pgserver (the [test] extra) and Debian's pgbouncer. Prints medians per call.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import robotmem.store.postgres.connection as pg_connection
from robotmem import Memory

PGBOUNCER = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None)


@contextmanager
def pgbouncer_in_front(url: str, pool_size: int = 2) -> Iterator[str]:
    """Debian's pgbouncer in transaction mode (``pool_size`` server connections) in front of the
    server ``url`` names; yields pgbouncer's URL without a database name (append one). Started by
    root, it runs as the owner of the server's socket folder (it refuses root). Also used by
    tests/robotmem/store/test_pgbouncer.py."""
    server = conninfo_to_dict(url)
    folder = Path(tempfile.mkdtemp(prefix="robotmem-pgbouncer-"))
    folder.chmod(0o777)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    user = str(server.get("user") or "postgres")
    host = str(server.get("host") or "localhost")
    password = f" password={server['password']}" if server.get("password") else ""
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    (folder / "pgbouncer.ini").write_text(textwrap.dedent(f"""\
        [databases]
        * = host={host} port={server.get("port") or 5432} user={user}{password}
        [pgbouncer]
        listen_addr = 127.0.0.1
        listen_port = {port}
        unix_socket_dir =
        auth_type = trust
        auth_file = {folder / "users.txt"}
        pool_mode = transaction
        default_pool_size = {pool_size}
        max_client_conn = 500
        logfile = {folder / "pgbouncer.log"}
        """))
    owner = (["-u", Path(host).owner() if host.startswith("/") else "nobody"] if os.geteuid() == 0 else [])
    process = subprocess.Popen([PGBOUNCER or "pgbouncer", "-q", *owner, str(folder / "pgbouncer.ini")],
                               stderr=subprocess.PIPE)
    try:
        while True:  # until it listens, or it has exited
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if process.poll() is not None:
                raise RuntimeError(f"pgbouncer exited: {process.stderr.read().decode() if process.stderr else ''}")
            time.sleep(0.05)
        yield f"postgresql://{user}@127.0.0.1:{port}/"
    finally:
        process.terminate()
        process.wait()
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def prepared_statements(on: bool) -> Iterator[None]:
    """psycopg's default (prepare a statement sent 5 times) on the connections robotmem opens."""
    original = pg_connection.psycopg.connect

    def connect(*args: Any, **kwargs: Any) -> Any:
        conn = original(*args, **kwargs)
        conn.prepare_threshold = 5
        return conn

    if on:
        pg_connection.psycopg.connect = connect  # type: ignore[assignment]
    try:
        yield
    finally:
        pg_connection.psycopg.connect = original  # type: ignore[assignment]


def one_round(url: str, tag: str, writes: int, recalls: int) -> tuple[float, float]:
    with Memory(url=url) as mem:
        mem.recall("warm the model and the connection")
        start = time.perf_counter()
        for i in range(writes):
            mem.save_perception(f"wrist force sample {tag} number {i}", "tactile")
        write_ms = (time.perf_counter() - start) / writes * 1e3
        start = time.perf_counter()
        for i in range(recalls):
            mem.recall(f"how hard to grip the bottle {i}")
        return write_ms, (time.perf_counter() - start) / recalls * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--writes", type=int, default=150)
    parser.add_argument("--recalls", type=int, default=60)
    args = parser.parse_args()
    import pgserver

    folder = Path(tempfile.mkdtemp(prefix="bench-pg-"))
    folder.chmod(0o755)
    server = pgserver.get_server(folder / "data", cleanup_mode="delete")
    url = server.get_uri()
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("CREATE EXTENSION IF NOT EXISTS vector")
    try:
        with Memory(url=url) as mem:
            for i in range(300):
                mem.learn(f"grip force {i % 37} N held the bottle on shelf {i}")
        with pgbouncer_in_front(make_conninfo(url)) as pooled_server:
            pooled = pooled_server + "postgres"
            ways = {"direct (robotmem: no prepared statements)": (url, False),
                    "direct, psycopg's prepared statements": (url, True),
                    "behind pgbouncer, transaction mode": (pooled, False)}
            figures: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
            for r in range(args.rounds):
                for name, (target, prepared) in ways.items():
                    with prepared_statements(prepared):
                        figures[name].append(one_round(target, f"{r}{name[:6]}", args.writes, args.recalls))
        print(f"{args.rounds} rounds of {args.writes} save_perception and {args.recalls} recall; medians per call, ms")
        for name, runs in figures.items():
            print(f"  {name:45s} save_perception {statistics.median(w for w, _ in runs):6.2f}"
                  f"   recall {statistics.median(r for _, r in runs):6.2f}")
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
