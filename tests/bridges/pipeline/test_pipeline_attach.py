"""Episodes attached to a session someone else owns (a control loop over the API or MCP)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import pytest
from pipeline_helpers import (
    T0,
    S,
    by_topic,
    learn,
    marker,
    records,
    straight_drive,
    summary_of,
)

from bridges.pipeline import BridgeConfig, Pipeline, TopicEpisodes
from bridges.pipeline.episodes import EndEpisode, StartEpisode, parse_marker
from robotmem import Memory

MakePipeline = Callable[..., Pipeline]


def _attach_marker(t_ns: int, session_id: str, **extra: object) -> object:
    return marker(t_ns, json.dumps({"event": "start", "session_id": session_id, **extra}))


def test_an_attached_episode_writes_into_the_owners_session_and_leaves_it_open(
        mem: Memory, make_pipeline: MakePipeline) -> None:
    control = mem.start_session("test", context={"task": {"name": "fetch"}})["session_id"]
    pipeline = make_pipeline(policy=TopicEpisodes())
    pipeline.episode(StartEpisode(T0, session_id=control, owned=False))
    for msg in straight_drive(T0, seconds=15):
        pipeline.feed(msg)
    pipeline.feed(learn(T0 + 5 * S, "The cup is on the left shelf"))
    pipeline.episode(EndEpisode(T0 + 16 * S, 0.9))
    stats = pipeline.close()

    assert mem.get_session(control)["status"] == "open"  # the owner ends it, not the pipeline
    assert stats.session_ids == [control] and stats.episodes_attached == 1 and stats.episodes_ended == 1
    assert len(mem.list_sessions()) == 1  # no session of the pipeline's own
    assert len(by_topic(mem, control, "/odom")) == 2
    assert [m["content"] for m in records(mem, control) if m["type"] == "fact"] == ["The cup is on the left shelf"]
    assert summary_of(mem, control)["task"]["outcome_score"] == 0.9
    found = mem.recall(collection="test", session_id=control, context_filter={"source.topic": "/odom"})
    assert found["count"] == 2


def test_when_the_owner_ends_the_session_mid_episode_the_rest_is_stored_with_its_episode_key(
        mem: Memory, make_pipeline: MakePipeline) -> None:
    control = mem.start_session("test")["session_id"]
    pipeline = make_pipeline(policy=TopicEpisodes())
    pipeline.feed(_attach_marker(T0, control))
    for msg in straight_drive(T0, seconds=12):
        pipeline.feed(msg)  # the first 10 s chunk is written into the session
    mem.end_session(control, 0.4)  # the control loop finishes before the pipeline hears of it
    pipeline.feed(learn(T0 + 12 * S, "Gripper slipped twice"))
    pipeline.feed(marker(T0 + 13 * S, json.dumps({"event": "end", "session_id": control})))
    stats = pipeline.close()

    assert mem.get_session(control)["outcome_score"] == 0.4
    assert len(by_topic(mem, control, "/odom")) == 1
    late = mem.recall(collection="test", context_filter={"episode.key": control, "episode.after_session_end": True},
                      n=10)["results"]
    kinds = sorted((r["type"], r.get("perception_type")) for r in late)
    assert kinds == [("fact", None), ("perception", "procedural"), ("perception", "proprioceptive")]
    assert all(r["session_id"] is None for r in late)
    assert stats.records_after_session_end == 3 and stats.episodes_ended == 1
    points = sum(mem.get_data(r["id"])["raw_points"] for r in late if r["perception_type"] == "proprioceptive")
    points += mem.get_data(by_topic(mem, control, "/odom")[0]["id"])["raw_points"]
    assert points == 12 * 20  # every pose received is stored once


def test_a_notes_own_episode_key_is_kept_after_the_owner_ended_the_session(
        mem: Memory, make_pipeline: MakePipeline) -> None:
    """Inside an episode a note's own ``episode.key`` is kept (the pipeline only adds one it lacks);
    a note held back until after the owner ended the session had it replaced by the session id."""
    control = mem.start_session("test")["session_id"]
    pipeline = make_pipeline(policy=TopicEpisodes())
    pipeline.feed(_attach_marker(T0, control))
    pipeline.feed(learn(T0 + S, '{"insight": "Shelf B restocked", "context": {"episode": {"key": "restock-7"}}}'))
    mem.end_session(control)
    pipeline.feed(learn(T0 + 2 * S, '{"insight": "Shelf C restocked", "context": {"episode": {"key": "restock-8"}}}'))
    pipeline.feed(learn(T0 + 3 * S, "Shelf D was empty"))
    pipeline.close()

    notes = {r["content"]: r for r in mem.recall(collection="test", query="", n=10, min_confidence=0.0,
                                                  context_filter={"source.topic": "/robotmem/learn"})["results"]}
    kept = notes["Shelf B restocked"]
    assert kept["session_id"] == control and kept["context"]["episode"]["key"] == "restock-7"
    late = notes["Shelf C restocked"]
    assert late["session_id"] is None and late["context"]["episode"]["key"] == "restock-8"
    assert late["context"]["episode"]["after_session_end"] is True
    plain = notes["Shelf D was empty"]
    assert plain["session_id"] is None and plain["context"]["episode"]["key"] == control
    assert plain["context"]["episode"]["after_session_end"] is True


@pytest.mark.parametrize("state", ["missing", "ended", "other collection"])
def test_attaching_to_a_session_that_cannot_take_records_gives_the_episode_its_own(
        mem: Memory, make_pipeline: MakePipeline, state: str, caplog: pytest.LogCaptureFixture) -> None:
    requested = "ses_not_there"
    if state == "ended":
        requested = mem.start_session("test")["session_id"]
        mem.end_session(requested)
    elif state == "other collection":
        requested = mem.start_session("elsewhere")["session_id"]
    pipeline = make_pipeline(policy=TopicEpisodes())
    with caplog.at_level(logging.WARNING, logger="bridges.pipeline"):
        pipeline.feed(_attach_marker(T0, requested))
    for msg in straight_drive(T0, seconds=2):
        pipeline.feed(msg)
    stats = pipeline.close()

    (own,) = stats.session_ids
    assert own != requested and stats.episodes_attached == 0
    assert f"cannot attach the episode to session {requested}" in caplog.text
    session = mem.get_session(own)
    assert session["status"] == "ended" and session["context"]["episode"]["requested_session_id"] == requested
    assert len(by_topic(mem, own, "/odom")) == 1


def test_an_end_for_another_session_does_not_end_the_attached_episode(mem: Memory, make_pipeline: MakePipeline) -> None:
    control = mem.start_session("test")["session_id"]
    pipeline = make_pipeline(policy=TopicEpisodes())
    pipeline.feed(_attach_marker(T0, control))
    pipeline.feed(marker(T0 + S, json.dumps({"event": "end", "session_id": "ses_someone_else"})))
    assert pipeline.stats.episodes_ended == 0
    pipeline.feed(marker(T0 + 2 * S, "end"))  # a plain end ends whatever is open ...
    pipeline.tick(T0 + 5 * S)  # ... and it is finished once late_grace_s has passed
    assert pipeline.stats.episodes_ended == 1
    assert mem.get_session(control)["status"] == "open"


def test_idleness_never_ends_an_attached_episode_and_a_long_one_splits_inside_the_session(
        mem: Memory, make_pipeline: MakePipeline) -> None:
    control = mem.start_session("test")["session_id"]
    policy = TopicEpisodes(idle_gap_s=5.0, outside="auto")
    pipeline = make_pipeline(policy=policy, config=BridgeConfig(max_episode_s=20.0))
    pipeline.feed(_attach_marker(T0, control, context={"task": {"name": "patrol"}}))
    for msg in straight_drive(T0, seconds=2):
        pipeline.feed(msg)
    pipeline.tick(T0 + 15 * S)  # 13 s without motion: an own episode would have ended
    assert pipeline.stats.episodes_ended == 0
    for msg in straight_drive(T0 + 16 * S, seconds=10, origin=(1.0, 0.0)):
        pipeline.feed(msg)  # passes the 20 s maximum: the episode is split
    stats = pipeline.close()

    assert stats.session_ids == [control, control] and stats.episodes_attached == 2
    summaries = [m for m in records(mem, control) if m["perception_type"] == "procedural"]
    assert len(summaries) == 2 and all(s["task"]["name"] == "patrol" for s in summaries)
    assert mem.get_session(control)["status"] == "open"


def test_the_json_marker_names_the_session_to_attach_to_or_to_end() -> None:
    start = parse_marker({"data": '{"event": "start", "session_id": "ses_1", "context": {"task": {"name": "x"}}}'})
    assert (start.event, start.session_id, start.context) == ("start", "ses_1", {"task": {"name": "x"}})
    end = parse_marker({"data": '{"event": "end", "session_id": "ses_1", "score": 0.5}'})
    assert (end.event, end.session_id, end.score) == ("end", "ses_1", 0.5)
    with pytest.raises(ValueError, match="session_id"):
        parse_marker({"data": '{"event": "start", "session_id": 7}'})
