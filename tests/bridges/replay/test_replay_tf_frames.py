"""Trajectories from /tf (through /tf_static) against the raw transforms read by the mcap library.

The oracle decodes /tf and /tf_static with mcap-ros2-support and composes the frame chain
with 4x4 homogeneous matrices (not the converter's quaternion code).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

from bridges.pipeline import BridgeConfig
from bridges.pipeline.config import parse_bridge_config
from bridges.replay import ReplayOptions, replay_recording
from robotmem import ConfigError, Memory

MCAP = "nav2_turtlebot_sim_mcap/nav2_turtlebot.mcap"


def _matrix(transform: Any) -> np.ndarray:
    t, q = transform.translation, transform.rotation
    x, y, z, w = q.x, q.y, q.z, q.w
    rotation = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                         [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                         [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
    matrix = np.eye(4)
    matrix[:3, :3], matrix[:3, 3] = rotation, (t.x, t.y, t.z)
    return matrix


def _tf_messages(path: Path) -> Iterator[tuple[int, dict[str, tuple[str, np.ndarray]], set[str]]]:
    """(log time ns, every link known so far: child -> (parent, matrix), the children this message
    changed) for each /tf and /tf_static message, read with mcap's own reader."""
    links: dict[str, tuple[str, np.ndarray]] = {}
    with open(path, "rb") as handle:
        reader = make_reader(handle, decoder_factories=[DecoderFactory()])
        for _s, _c, message, tf in reader.iter_decoded_messages(topics=["/tf", "/tf_static"], log_time_order=True):
            changed = set()
            for entry in tf.transforms:
                links[entry.child_frame_id] = (entry.header.frame_id, _matrix(entry.transform))
                changed.add(entry.child_frame_id)
            yield message.log_time, links, changed


def _compose(links: dict[str, tuple[str, np.ndarray]], parent: str, child: str) -> tuple[bool, np.ndarray, set[str]]:
    """(whether the chain reaches ``parent``, the pose of ``child`` in it, the children on the chain)."""
    frame, pose, used = child, np.eye(4), set()
    while frame != parent and frame in links:
        used.add(frame)
        frame, link = links[frame][0], links[frame][1]
        pose = link @ pose
    return frame == parent, pose, used


def _oracle(path: Path, parent: str, child: str) -> tuple[np.ndarray, np.ndarray]:
    """(log times s, positions) of ``child`` in ``parent`` after every message that changes a link of the chain."""
    times, points = [], []
    for log_time, links, changed in _tf_messages(path):
        reached, pose, used = _compose(links, parent, child)
        if reached and changed & used:
            times.append(log_time / 1e9)
            points.append(pose[:3, 3])
    return np.asarray(times), np.asarray(points)


def _oracle_default_pairs(path: Path) -> list[tuple[int, str, np.ndarray]]:
    """(log time ns, "parent->child", position) for every /tf message that changes a link of the
    first of tf2's usual pairs the tree connects then (the converter's documented default)."""
    pairs = [("map", "base_link"), ("map", "base_footprint"), ("odom", "base_link"), ("odom", "base_footprint")]
    poses = []
    for log_time, links, changed in _tf_messages(path):
        for parent, child in pairs:
            reached, pose, used = _compose(links, parent, child)
            if reached:
                if changed & used:
                    poses.append((log_time, f"{parent}->{child}", pose[:3, 3]))
                break
    return poses


def _tf_chunks(memory: Memory, session_id: str, frame: str) -> list[dict[str, Any]]:
    chunks = [m for m in memory.session_timeline(session_id)["memories"]
              if m["context"]["source"].get("topic") == "/tf" and m["context"]["spatial"]["frame"] == frame]
    return sorted(chunks, key=lambda m: m["context"]["episode"]["t_start_ns"])


@pytest.mark.parametrize("pair", [None, ("map", "rplidar_link")])
def test_tf_trajectory_matches_the_transforms_composed_from_the_raw_messages(
        shared_datasets: Path, memory: Memory, pair: tuple[str, str] | None) -> None:
    path = shared_datasets / MCAP
    config = BridgeConfig() if pair is None else parse_bridge_config({"tf_frames": list(pair)})
    parent, child = pair or ("map", "base_link")  # the default: map -> base_link, which this tree has
    times, points = _oracle(path, parent, child)
    assert len(points) > 2500
    result = replay_recording(memory, path, config, ReplayOptions())
    (session,) = result.stats.session_ids
    chunks = _tf_chunks(memory, session, parent)
    assert chunks and all(c["context"]["source"]["tf"] == f"{parent}->{child}" for c in chunks)
    raw_points = sum(memory.get_data(c["id"])["raw_points"] for c in chunks)
    assert raw_points == len(points)
    first, last = chunks[0]["context"]["spatial"], chunks[-1]["context"]["spatial"]
    assert first["start_position"] == pytest.approx(points[0].tolist(), abs=1e-4)
    assert last["end_position"] == pytest.approx(points[-1].tolist(), abs=1e-4)
    steps = np.linalg.norm(np.diff(points, axis=0), axis=1)
    oracle_length = float(steps[np.diff(times) <= BridgeConfig().gap_min_s].sum())  # gaps are not path
    stored_length = sum(c["context"]["spatial"]["path_length_m"] for c in chunks)
    assert stored_length == pytest.approx(oracle_length, rel=1e-3)


def test_default_pair_chunks_name_the_pair_of_their_points_and_a_frame_switch_leaves_no_stub(
        shared_datasets: Path, memory: Memory) -> None:
    """The nav2 tree has odom -> base_link alone for one message, then map -> odom: the first chunk
    is that odom pose (labelled odom->base_link, not the pair current when it was written) and the
    map trajectory starts in one chunk at the first map pose, not in a one-point chunk of its own."""
    path = shared_datasets / MCAP
    oracle = _oracle_default_pairs(path)
    times = np.asarray([t for t, _, _ in oracle])
    labels = [label for _, label, _ in oracle]
    assert labels[0] == "odom->base_link" and "map->base_link" in labels  # the switch this test is about
    result = replay_recording(memory, path, BridgeConfig(), ReplayOptions())
    (session,) = result.stats.session_ids
    chunks = sorted((m for m in memory.session_timeline(session)["memories"]
                     if m["context"]["source"].get("topic") == "/tf" and "spatial" in m["context"]
                     and m["context"]["source"].get("msgtype") == "tf2_msgs/msg/TFMessage"),
                    key=lambda m: m["context"]["episode"]["t_start_ns"])
    per_pair: dict[str, list[int]] = {}
    for chunk in chunks:
        context = chunk["context"]
        start, end = context["episode"]["t_start_ns"], context["episode"]["t_end_ns"]
        inside = np.flatnonzero((times >= start) & (times <= end))
        composed = {labels[i] for i in inside}
        assert composed == {context["source"]["tf"]}, (context["source"]["tf"], composed)
        assert context["spatial"]["frame"] == context["source"]["tf"].split("->")[0]
        assert memory.get_data(chunk["id"])["raw_points"] == len(inside)
        assert context["spatial"]["start_position"] == pytest.approx(oracle[inside[0]][2].tolist(), abs=1e-4)
        per_pair.setdefault(context["source"]["tf"], []).append(len(inside))
    for label, counts in per_pair.items():
        assert sum(counts) == labels.count(label)  # every composed pose is in a chunk of its pair
        # a pair with more than one pose has no one-point chunk (the stub the frame switch made)
        assert labels.count(label) == 1 or min(counts) > 1, (label, counts)


def test_tf_frames_must_name_two_frames() -> None:
    with pytest.raises(ConfigError) as err:
        parse_bridge_config({"tf_frames": ["map"]})
    assert err.value.field == "tf_frames"
