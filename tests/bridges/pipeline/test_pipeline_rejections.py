"""A record or note robotmem refuses is counted as rejected; the rest of the stream is stored."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from pipeline_helpers import T0, S, learn, odom, records, straight_drive, summary_of

from bridges.pipeline import BridgeConfig, FileEpisodes, Pipeline
from robotmem import Memory

TOO_LONG = "y" * 400  # robotmem's limit for an insight is 300 characters
BAD_CONTEXT = json.dumps({"insight": "door was open", "context": {"spatial": "not an object"}})


def test_a_note_robotmem_refuses_is_counted_as_rejected_and_the_episode_is_stored(
        make_pipeline: Callable[..., Pipeline], mem: Memory, caplog: pytest.LogCaptureFixture) -> None:
    pipeline = make_pipeline(background_writes=True)
    for msg in straight_drive(T0, 2.0):
        pipeline.feed(msg)
    with caplog.at_level(logging.WARNING, logger="bridges.pipeline"):
        pipeline.feed(learn(T0 + 2 * S, TOO_LONG))
        pipeline.feed(learn(T0 + 2 * S + 1, BAD_CONTEXT))
        pipeline.feed(learn(T0 + 2 * S + 2, "a fine short note"))
        stats = pipeline.close()

    notes = stats.topics["/robotmem/learn"]
    assert (notes.rejected, notes.records) == (2, 1)
    assert "300" in notes.rejected_reason and stats.records_rejected == 2
    rejections = [r for r in caplog.records if "rejected by robotmem" in r.getMessage()]
    assert len(rejections) == 1, "the reason is logged once per topic"
    (session_id,) = stats.session_ids
    assert mem.get_session(session_id)["status"] == "ended"
    stored = [r["content"] for r in records(mem, session_id)]
    assert "a fine short note" in stored and stats.topics["/odom"].records >= 1


def test_a_perception_robotmem_refuses_in_a_batch_leaves_the_others_written(
        make_pipeline: Callable[..., Pipeline], mem: Memory) -> None:
    pipeline = make_pipeline()
    good = {"description": "a good record", "perception_type": "visual", "data": {"a": 1}, "session_id": None,
            "metadata": {"source": {"topic": "/good"}}}
    bad = {"description": "a bad record", "perception_type": "smell", "session_id": None}
    pipeline.writer.write([("/good", good), ("/bad", bad), ("/good", dict(good, description="another one"))])
    stats = pipeline.close()
    assert (stats.topics["/bad"].rejected, stats.topics["/good"].records) == (1, 2)
    assert stats.topics["/bad"].rejected_reason.endswith("(field records[0].perception_type)")  # retried alone
    found = mem.recall("", n=10, min_confidence=0, context_filter={"source.topic": "/good"})["results"]
    assert {r["content"] for r in found} == {"a good record", "another one"}


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
@pytest.mark.parametrize("frame", ["od\x00om", "od\ud800om"])
def test_a_message_with_a_frame_id_robotmem_refuses_is_refused_alone_and_the_summary_is_stored(
        store: str, frame: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    # the frame reached the episode summary's metadata, which was refused too: the summary was lost
    location = request.getfixturevalue("postgres_url") if store == "postgresql" else tmp_path / "memory.db"
    with Memory(location, embedder=None) as mem:
        pipeline = Pipeline(mem, BridgeConfig(), episode_policy=FileEpisodes(), collection="test",
                            robot_id="bot-1", source="/recordings/test.mcap")
        for msg in straight_drive(T0, 2.0) + [odom(T0 + 3 * S, 1, 1, frame=frame)] + straight_drive(T0 + 4 * S, 1.0):
            pipeline.feed(msg)
        stats = pipeline.close()
        assert {t: s.rejected for t, s in stats.topics.items() if s.rejected} == {"/odom": 1}
        (session_id,) = stats.session_ids
        summary = summary_of(mem, session_id)
        # the frame is there, shown as unreadable
        assert set(summary["context"]["spatial"]["frame"].split(",")) == {"od\ufffdom", "odom"}
        assert mem.session_overviews([session_id])[session_id]["summary"] is not None
        stored = [r for r in records(mem, session_id) if r["context"].get("source", {}).get("topic") == "/odom"]
        assert len(stored) == 2  # the chunks before and after the refused message


@pytest.mark.parametrize("section", ["source", "episode", "robot"])
def test_a_note_whose_context_holds_a_section_the_bridge_writes_into_as_no_object_is_malformed(
        make_pipeline: Callable[..., Pipeline], mem: Memory, section: str, caplog: pytest.LogCaptureFixture) -> None:
    # The bridge adds source.topic, episode.key and robot.id to a note: a string there raised
    # AttributeError out of feed (a replay of the recording stopped there, every time).
    pipeline = make_pipeline()
    for msg in straight_drive(T0, 2.0):
        pipeline.feed(msg)
    with caplog.at_level(logging.WARNING, logger="bridges.pipeline"):
        pipeline.feed(learn(T0 + S, json.dumps({"insight": "door was open", "context": {section: "mine"}})))
    pipeline.feed(learn(T0 + S + 1, "a fine short note"))
    stats = pipeline.close()
    notes = stats.topics["/robotmem/learn"]
    assert (notes.malformed, notes.records) == (1, 1)
    assert any(f"context '{section}' must be a JSON object" in r.getMessage() for r in caplog.records)
    (session_id,) = stats.session_ids
    assert [r["content"] for r in records(mem, session_id) if r["type"] == "fact"] == ["a fine short note"]
