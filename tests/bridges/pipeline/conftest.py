"""Fixtures for the pipeline tests: a real SQLite store (no vectors: recall runs on BM25)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bridges.pipeline import BridgeConfig, FileEpisodes, Pipeline
from bridges.pipeline.episodes import EpisodePolicy
from robotmem import Memory


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(tmp_path / "memory.db", embedder=None) as memory:
        yield memory


@pytest.fixture
def make_pipeline(mem: Memory) -> Callable[..., Pipeline]:
    """Pipeline over the test store; keyword arguments override the defaults."""

    def build(
        config: BridgeConfig | None = None, policy: EpisodePolicy | None = None, **kwargs: object
    ) -> Pipeline:
        options: dict[str, object] = {"collection": "test", "robot_id": "bot-1", "source": "/recordings/test.mcap"}
        options.update(kwargs)
        return Pipeline(mem, config or BridgeConfig(), episode_policy=policy or FileEpisodes(), **options)  # type: ignore[arg-type]

    return build
