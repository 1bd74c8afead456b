"""Shared fixtures: every test gets its own ROBOTMEM_HOME; the built ONNX model is shared."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = REPO_ROOT.parent / "shared"


@pytest.fixture(scope="session", autouse=True)
def _shared_model_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Build the ONNX model at most once per test run (also for server subprocesses)."""
    cache = os.environ.get("ROBOTMEM_TEST_MODELS_DIR")
    path = Path(cache) if cache else tmp_path_factory.mktemp("models")
    old = os.environ.get("ROBOTMEM_MODELS_DIR")
    os.environ["ROBOTMEM_MODELS_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("ROBOTMEM_MODELS_DIR", None)
    else:
        os.environ["ROBOTMEM_MODELS_DIR"] = old


@pytest.fixture(autouse=True)
def robotmem_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the data directory at a temporary folder for every test."""
    home = tmp_path / "robotmem-home"
    home.mkdir()
    monkeypatch.setenv("ROBOTMEM_HOME", str(home))
    # ROBOTMEM_URL too: a developer's exported fleet database must never receive test writes.
    for var in ("ROBOTMEM_DB_PATH", "ROBOTMEM_URL", "ROBOTMEM_TOKEN", "ROBOTMEM_COLLECTION", "ROBOTMEM_EMBEDDINGS"):
        monkeypatch.delenv(var, raising=False)
    return home


def _shared(name: str, what: str) -> Path:
    """../shared/NAME; a user's own clone skips without it, CI (which has it) fails."""
    path = SHARED / name
    if not path.is_dir():
        message = f"{what} not found at {path} (they live beside the checkout in ../shared)"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI must have them")
        pytest.skip(message)
    return path


@pytest.fixture
def shared_datasets() -> Path:
    return _shared("datasets", "real recordings")


@pytest.fixture
def shared_reference() -> Path:
    return _shared("reference", "reference embeddings")


# -- PostgreSQL: a real server with pgvector for the conformance suite --------------------


@pytest.fixture(scope="session")
def postgres_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PostgreSQL 16 + pgvector server for the whole run.

    ``ROBOTMEM_TEST_POSTGRES_URL`` names an external one; otherwise ``pgserver`` starts one in a
    temporary folder (it also runs as root). Missing both: CI fails, a local run skips.
    """
    external = os.environ.get("ROBOTMEM_TEST_POSTGRES_URL")
    if external:
        yield external
        return
    try:
        import pgserver
    except ImportError:
        message = "PostgreSQL tests need the pgserver package (pip install -e '.[test]') or ROBOTMEM_TEST_POSTGRES_URL"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    # Not under pytest's private temp folder: as root, pgserver runs the server as another
    # user, which must be able to reach the data folder.
    parent = Path(tempfile.mkdtemp(prefix="robotmem-pg-"))
    parent.chmod(0o755)
    server = pgserver.get_server(parent / "data", cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture
def own_server() -> Iterator[tuple[Any, Path]]:
    """A PostgreSQL server of this test's own, to stop (``server.cleanup()``) and start again
    (``pgserver.get_server(pgdata, cleanup_mode="stop")``); yields (server, pgdata)."""
    pgserver = pytest.importorskip("pgserver")
    parent = Path(tempfile.mkdtemp(prefix="robotmem-pg-own-"))
    parent.chmod(0o755)
    server = pgserver.get_server(parent / "data", cleanup_mode="stop")
    yield server, parent / "data"
    server.cleanup()
    shutil.rmtree(parent, ignore_errors=True)


_schema_counter = iter(range(1, 1_000_000))


@contextmanager
def _fresh_schema(server_url: str) -> Iterator[str]:
    """A URL whose tables live in a fresh schema of the shared server (dropped afterwards)."""
    import psycopg

    schema = f"t{os.getpid()}_{next(_schema_counter)}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute("CREATE EXTENSION IF NOT EXISTS vector")
        admin.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in server_url else "?"
    yield f"{server_url}{sep}options=-csearch_path%3D{schema},public"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def postgres_url(postgres_server_url: str) -> Iterator[str]:
    """A URL whose tables live in a fresh schema of the shared server (dropped afterwards)."""
    with _fresh_schema(postgres_server_url) as url:
        yield url


@pytest.fixture(scope="module")
def module_postgres_url(postgres_server_url: str) -> Iterator[str]:
    """As postgres_url, for a store a whole test module shares."""
    with _fresh_schema(postgres_server_url) as url:
        yield url


@pytest.fixture(scope="session")
def password_role(postgres_server_url: str) -> tuple[str, str, str]:
    """A role that must give its password. On the pgserver of this run, local logins trust
    everyone, so the role's line goes first in pg_hba.conf; an external server is used as set up."""
    from urllib.parse import urlsplit

    import psycopg

    user, password, database = "robotmem_pw", "right-password", "robotmem_pwdb"
    with psycopg.connect(postgres_server_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {database}")
        admin.execute(f"DROP ROLE IF EXISTS {user}")
        admin.execute(f"CREATE ROLE {user} LOGIN PASSWORD '{password}'")
        admin.execute(f"CREATE DATABASE {database} OWNER {user}")
    own_db = urlsplit(postgres_server_url)._replace(path="/" + database).geturl()
    with psycopg.connect(own_db, autocommit=True) as admin:
        admin.execute("CREATE EXTENSION IF NOT EXISTS vector")
    with psycopg.connect(postgres_server_url, autocommit=True) as admin:
        if not os.environ.get("ROBOTMEM_TEST_POSTGRES_URL"):
            hba = Path(admin.execute("SHOW hba_file").fetchone()[0])
            lines = f"local all {user} scram-sha-256\nhost all {user} all scram-sha-256\n"
            hba.write_text(lines + hba.read_text())
            admin.execute("SELECT pg_reload_conf()")
    return user, password, database


class SmallDisk:
    """A real disk that fills up: a tmpfs of a few MB. ``fill`` writes a ballast file until the disk
    refuses another byte; ``free`` removes it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.ballast = folder / "ballast"

    def fill(self) -> None:
        fd = os.open(self.ballast, os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, bytes(65536))
        except OSError:
            pass
        finally:
            os.close(fd)

    def free(self) -> None:
        self.ballast.unlink()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[[str], SmallDisk]]:
    """Mounts a tmpfs of the given size (``"4m"``) in a folder of its own; skips where that cannot be
    done (it needs root and ``mount``). Unmounted at the end whatever happens."""
    mounted: list[Path] = []

    def mount(size: str) -> SmallDisk:
        if os.geteuid() != 0:
            pytest.skip("a real full disk is a small tmpfs, and mounting one needs root")
        folder = tmp_path / f"disk{len(mounted)}"
        folder.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(folder)
        return SmallDisk(folder)

    yield mount
    for folder in reversed(mounted):
        subprocess.run(["umount", str(folder)], check=True)
