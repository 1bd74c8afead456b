"""Which records robotmem embeds: not templated numeric ones (trajectories, laser summaries)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pipeline_helpers import T0, S, joints, learn, records, straight_drive

from bridges.pipeline import BridgeConfig, FileEpisodes, Pipeline, RosMessage
from robotmem import Memory


@pytest.fixture
def embedding_mem(tmp_path: Path) -> Iterator[Memory]:
    """A real store with the real ONNX model (the model cache is shared by the test run)."""
    with Memory(tmp_path / "embedded.db") as memory:
        yield memory


def _scan(t_ns: int) -> RosMessage:
    data = {"header": {"stamp": {"sec": t_ns // S, "nanosec": 0}, "frame_id": "laser"}, "angle_min": -1.0,
            "angle_max": 1.0, "angle_increment": 0.5, "range_min": 0.1, "range_max": 10.0,
            "ranges": [1.0, 2.0, 3.0, 2.5, 1.5]}
    return RosMessage("/scan", "sensor_msgs/msg/LaserScan", t_ns, data)


def _image(t_ns: int) -> RosMessage:
    data = {"header": {"stamp": {"sec": t_ns // S, "nanosec": 0}, "frame_id": "cam"}, "height": 4, "width": 4,
            "encoding": "rgb8", "is_bigendian": 0, "step": 12, "data": bytes(range(48))}
    return RosMessage("/camera/image_raw", "sensor_msgs/msg/Image", t_ns, data)


def _episode(memory: Memory) -> str:
    pipeline = Pipeline(memory, BridgeConfig(), collection="test", robot_id="bot-1", episode_policy=FileEpisodes(),
                        source="/recordings/embed.mcap")
    for msg in straight_drive(T0, seconds=12, speed=1.0):
        pipeline.feed(msg)
    for i in range(5):
        pipeline.feed(joints(T0 + i * S, [0.1 * i, 0.2]))
    pipeline.feed(_scan(T0 + 2 * S))
    pipeline.feed(_image(T0 + 3 * S))
    pipeline.feed(learn(T0 + 4 * S, "The charging dock is next to the red door"))
    (session,) = pipeline.close().session_ids
    return session


def test_only_summaries_notes_and_images_are_embedded(embedding_mem: Memory) -> None:
    session = _episode(embedding_mem)
    kinds = sorted(r["context"]["source"].get("topic", "(summary)") for r in records(embedding_mem, session))
    assert kinds == ["(summary)", "/camera/image_raw", "/joint_states", "/odom", "/odom", "/robotmem/learn", "/scan"]
    assert sum(embedding_mem.stats()["embeddings"].values()) == 3  # summary, image, note


def test_records_without_vectors_are_still_found_by_text_filters_and_place(embedding_mem: Memory) -> None:
    session = _episode(embedding_mem)
    by_text = embedding_mem.recall("pose trajectory odom", collection="test", n=10,
                                   context_filter={"source.topic": "/odom"})["results"]
    assert len(by_text) == 2 and {r["session_id"] for r in by_text} == {session}
    nearest = embedding_mem.recall(collection="test", n=1, context_filter={"source.topic": "/odom"},
                                   spatial_sort={"field": "spatial.position", "target": [11.0, 0.0, 0.0]})["results"]
    assert nearest[0]["spatial"]["bbox"][0][0] <= 11.0 <= nearest[0]["spatial"]["bbox"][1][0]
    laser = embedding_mem.recall("laser scan nearest obstacle", collection="test", n=1)["results"]
    assert laser and laser[0]["context"]["source"]["topic"] == "/scan"
    # semantic: no shared words, so ranked first but below the default min_relevance
    note = embedding_mem.recall("where do I recharge", collection="test", n=1, min_relevance=0)["results"]
    assert note[0]["content"] == "The charging dock is next to the red door" and note[0]["similarity"] > 0.4
