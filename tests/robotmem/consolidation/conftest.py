"""Fixtures for the consolidation tests.

The parent conftest gives ``clock`` (a settable clock: the test seam for time), ``mem``
(a real SQLite store without vectors) and ``hybrid_mem`` (the same with the real ONNX
embedder). Here: an episode helper and the decay formula the tests check against.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from robotmem import Config, Memory

DAY = 86_400.0
HALF_LIFE_S = Config().half_life_days * DAY


def expected_confidence(c0: float, reinforced_at: float, now: float) -> float:
    """What recall must report: ``c0 * 2^(-(now - t_reinforced) / half_life)``, rounded like a hit."""
    return round(c0 * 2.0 ** (-max(0.0, now - reinforced_at) / HALF_LIFE_S), 6)


Episode = Callable[..., tuple[str, list[int]]]


@pytest.fixture
def episode(clock: Any) -> Episode:
    """``episode(mem, [(text, context), ...], task=..., step_s=...)`` -> (session id, memory ids).

    Starts a session, learns the facts ``step_s`` seconds apart, and leaves it open.
    """

    def run(mem: Memory, facts: list[tuple[str, dict[str, Any] | None]], *, context: dict[str, Any] | None = None,
            step_s: float = 10.0) -> tuple[str, list[int]]:
        sid = mem.start_session(context=context)["session_id"]
        ids = []
        for text, ctx in facts:
            clock.advance(step_s)
            ids.append(mem.learn(text, ctx, session_id=sid)["memory_id"])
        return sid, ids

    return run


@pytest.fixture
def no_merge_mem(db_path: Path, clock: Any) -> Iterator[Memory]:
    """The same file as ``hybrid_mem`` opened with merging switched off (thresholds above 1):
    it leaves ended sessions unconsolidated, as a bulk import would."""
    config = Config.load(db_path=db_path, merge_cosine=1.5, merge_text_similarity=1.5)
    with Memory(db_path, clock=clock, config=config) as memory:
        yield memory
