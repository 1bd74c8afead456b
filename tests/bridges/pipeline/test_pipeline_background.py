"""Background writes (replay): same records in the same order, errors surface in the caller."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pipeline_helpers import T0, S, learn, marker, records, straight_drive

from bridges.pipeline import BridgeConfig, Pipeline, TopicEpisodes
from robotmem import Memory
from robotmem.errors import StorageError

MakePipeline = Callable[..., Pipeline]


def _episodes() -> list:
    messages = []
    for k in range(3):
        start = T0 + k * 100 * S
        messages += [marker(start, f'start {{"task": {{"name": "run{k}"}}}}'), *straight_drive(start, 45),
                     learn(start + 10 * S, f"Note number {k} about the run"), marker(start + 46 * S, f"end 0.{k + 1}")]
    return messages


def _contents(mem: Memory) -> list[list[tuple[str, str]]]:
    sessions = sorted(mem.list_sessions(), key=lambda s: s["context"]["task"]["name"])
    return [[(r["type"], r["content"]) for r in records(mem, s["session_id"])] for s in sessions]


def test_background_writes_store_the_same_records_in_the_same_order(tmp_path: Path) -> None:
    results = []
    for background in (False, True):
        with Memory(tmp_path / f"bg-{background}.db", embedder=None) as mem:
            pipeline = Pipeline(mem, BridgeConfig(),
                                collection="c", robot_id=None, episode_policy=TopicEpisodes(), source="/x.mcap",
                                session_id_for=lambda t: f"rpl_x_{t}", background_writes=background)
            for msg in _episodes():
                pipeline.feed(msg)
            stats = pipeline.close()
            assert stats.episodes_ended == 3 and stats.facts_learned == 3
            results.append((_contents(mem), [s["outcome_score"] for s in mem.list_sessions()]))
    assert results[0] == results[1]
    assert len(results[0][0][0]) == 5 + 1 + 1  # five chunks, one note, one summary


def test_a_storage_error_on_the_writer_thread_is_raised_in_the_callers_thread(
    mem: Memory, make_pipeline: MakePipeline
) -> None:
    pipeline = make_pipeline(background_writes=True, session_id_for=lambda t: f"rpl_err_{t}")
    for msg in straight_drive(T0, 5):
        pipeline.feed(msg)
    mem.close()  # the store goes away underneath the running pipeline
    with pytest.raises(StorageError, match="closed"):  # at the next hand-over (a feed that writes) or at close
        for msg in straight_drive(T0 + 5 * S, 20):
            pipeline.feed(msg)
        pipeline.close()
