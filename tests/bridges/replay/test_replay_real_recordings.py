"""Replay of two public recordings made by others (../shared/datasets; skipped where absent).

Ground truth comes from reading the files with other decoders than the replay path
(mcap-ros2-support's decoder, rosbags' raw reader without decoding).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rosbags.rosbag1 import Reader as Ros1Reader

from bridges.pipeline import BridgeConfig
from bridges.pipeline.config import parse_bridge_config
from bridges.replay import ReplayOptions, replay_recording
from robotmem import Memory

MCAP = "nav2_turtlebot_sim_mcap/nav2_turtlebot.mcap"
BAG = "turtlebot3_nav_ros1_bag/rosbag_demo.bag"


def _raw_odom(path: Path, with_log_time: bool = False) -> np.ndarray:
    """Every /odom position (and log time, s), decoded by mcap-ros2-support (not by the replay path)."""
    points = []
    with open(path, "rb") as handle:
        reader = make_reader(handle, decoder_factories=[DecoderFactory()])
        for _schema, _channel, message, odom in reader.iter_decoded_messages(topics=["/odom"]):
            p = odom.pose.pose.position
            points.append((p.x, p.y, p.z) + ((message.log_time / 1e9,) if with_log_time else ()))
    return np.asarray(points)


def _length_without_pauses(points: np.ndarray, t_s: np.ndarray, pause_s: float) -> float:
    """Path length leaving out the steps across pauses longer than ``pause_s`` (gaps: not travelled)."""
    steps = np.linalg.norm(np.diff(points, axis=0), axis=1)
    return float(steps[np.diff(t_s) <= pause_s].sum())


def _mcap_summary_counts(path: Path) -> dict[str, int]:
    """Per-topic message counts from the MCAP's own summary statistics."""
    with open(path, "rb") as handle:
        summary = make_reader(handle).get_summary()
    assert summary is not None and summary.statistics is not None
    counts: dict[str, int] = {}
    for channel_id, count in summary.statistics.channel_message_counts.items():
        topic = summary.channels[channel_id].topic
        counts[topic] = counts.get(topic, 0) + count
    return counts


def _raw_location_tracks(path: Path) -> list[np.ndarray]:
    """The bag's /location positions split into its two interleaved tracks, straight from the bytes:
    each pose joins the track whose latest pose is nearer (the tracks run metres apart)."""
    with Ros1Reader(path) as raw:
        conns = [c for c in raw.connections if c.topic == "/location"]
        points = [np.frombuffer(data, dtype="<f8", count=3, offset=16) for _c, _t, data in raw.messages(conns)]
    tracks: list[list[np.ndarray]] = [[points[0]], []]
    for point in points[1:]:
        near_first = np.linalg.norm(point[:2] - tracks[0][-1][:2])
        if not tracks[1]:
            tracks[0 if near_first < 1.0 else 1].append(point)
            continue
        near_second = np.linalg.norm(point[:2] - tracks[1][-1][:2])
        tracks[0 if near_first <= near_second else 1].append(point)
    return [np.asarray(track) for track in tracks]


def _length(points: np.ndarray) -> float:
    return float(np.linalg.norm(np.diff(points, axis=0), axis=1).sum())


def _session_records(memory: Memory, session_id: str) -> list[dict[str, Any]]:
    return memory.session_timeline(session_id)["memories"]


def _stored_path(memory: Memory, session_id: str, topic: str) -> np.ndarray:
    chunks = [m for m in _session_records(memory, session_id)
              if m["context"].get("source", {}).get("topic") == topic]
    chunks.sort(key=lambda m: m["context"]["episode"]["t_start_ns"])
    data = [memory.get_data(c["id"]) for c in chunks]
    return np.concatenate([np.column_stack([d["x"], d["y"], d["z"]]) for d in data])


def _summary(memory: Memory, session_id: str) -> dict[str, Any]:
    (summary,) = [m for m in _session_records(memory, session_id) if m["perception_type"] == "procedural"]
    return summary


def test_nav2_mcap_counts_path_length_and_stored_path_match_the_raw_odometry(
    shared_datasets: Path, memory: Memory
) -> None:
    path = shared_datasets / MCAP
    timed = _raw_odom(path, with_log_time=True)
    raw, log_s = timed[:, :3], timed[:, 3]
    raw_length = _length(raw)
    assert len(raw) == 2639 and raw_length == pytest.approx(34.32, abs=0.01)
    # /odom pauses once for 2.2 s (0.66 m jump): a gap, whose jump is not path
    pauses = np.flatnonzero(np.diff(log_s) > BridgeConfig().gap_min_s)
    assert len(pauses) == 1
    gap_free_length = _length_without_pauses(raw, log_s, BridgeConfig().gap_min_s)
    assert raw_length - gap_free_length == pytest.approx(0.66, abs=0.01)

    result = replay_recording(memory, path, BridgeConfig(), ReplayOptions(collection="nav2", robot_id="tb3"))

    expected = _mcap_summary_counts(path)
    assert set(expected) == {"/odom", "/amcl_pose", "/tf", "/tf_static"}
    read = {t: s.messages for t, s in result.stats.topics.items() if s.messages}
    ignored = result.as_dict()["ignored_topics"]
    assert ignored == {}  # /tf and /tf_static make the map -> base_link trajectory (test_replay_tf_frames.py)
    assert {**read, **ignored} == expected  # every topic: read with the file's count, or counted as not read
    assert sum(s.malformed for s in result.stats.topics.values()) == 0
    (session_id,) = result.stats.session_ids
    summary = _summary(memory, session_id)
    spatial = summary["spatial"]
    assert spatial["topic"] == "/odom" and spatial["path_quality"] == "gaps"
    assert spatial["path_length_m"] == pytest.approx(gap_free_length, rel=0.02)
    (gap,) = [g for g in summary["context"]["gaps"] if g["topic"] == "/odom"]
    assert gap["duration_s"] == pytest.approx(np.diff(log_s)[pauses[0]], abs=0.5)
    assert spatial["start_position"] == pytest.approx(raw[0].tolist(), abs=1e-4)
    assert spatial["end_position"] == pytest.approx(raw[-1].tolist(), abs=1e-4)
    stored = _stored_path(memory, session_id, "/odom")
    assert len(stored) < len(raw) / 2  # RDP downsampled what is stored...
    assert _length(stored) == pytest.approx(raw_length, rel=0.02)  # ...and it still traces the same path


def test_spatial_recall_near_a_point_on_the_route_returns_that_episode_first(
    shared_datasets: Path, memory: Memory
) -> None:
    mcap = replay_recording(memory, shared_datasets / MCAP, BridgeConfig(), ReplayOptions(collection="tb"))
    bag = replay_recording(memory, shared_datasets / BAG, BridgeConfig(), ReplayOptions(collection="tb"))
    raw = _raw_odom(shared_datasets / MCAP)
    far_corner = raw[int(np.argmax(raw[:, 0]))]  # x = 12.4 m: well away from the other run
    hits = memory.recall("", collection="tb", n=3, spatial_sort={
        "field": "spatial.position", "target": far_corner[:2].tolist()})["results"]
    assert hits[0]["session_id"] == mcap.stats.session_ids[0]
    assert hits[0]["distance"] < 2.0
    (bag_session,) = bag.stats.session_ids
    tracks = _raw_location_tracks(shared_datasets / BAG)
    assert sorted(len(t) for t in tracks) == [2423, 2850]
    for track in tracks:  # on each track, the point farthest from the Nav2 run's route
        away = np.min(np.linalg.norm(track[:, None, :2] - raw[None, :, :2], axis=2), axis=1)
        probe = track[int(np.argmax(away))]
        hits = memory.recall("", collection="tb", n=3, spatial_sort={
            "field": "spatial.position", "target": probe[:2].tolist()})["results"]
        assert hits[0]["session_id"] == bag_session, f"probe {probe[:2]} found another episode first"
        assert hits[0]["distance"] < 1.0


@pytest.mark.parametrize("recording", [MCAP, BAG])
def test_replaying_the_same_recording_again_adds_nothing(shared_datasets: Path, tmp_path: Path,
                                                         recording: str) -> None:
    options = ReplayOptions(collection="again")
    with Memory(tmp_path / "again.db", embedder=None) as memory:
        first = replay_recording(memory, shared_datasets / recording, BridgeConfig(), options)
        before = memory.stats()
        again = replay_recording(memory, shared_datasets / recording, BridgeConfig(), options)
        assert memory.stats() == before
    assert again.stats.episodes_skipped == 1 and again.stats.records_written == 0
    assert again.stats.session_ids == first.stats.session_ids


def test_notes_outside_episodes_from_the_ros1_bag_are_stored_once_over_three_replays(
        shared_datasets: Path, tmp_path: Path) -> None:
    # The bag's /mode strings ("charging", "navigating") as notes; with topic markers (the bag
    # has none) no episode opens, so every note is outside episodes.
    config = parse_bridge_config({"topics": [{"topic": "/mode", "converter": "learn"}]})
    options = ReplayOptions(collection="modes", episode_split="topic:/robotmem/episode")
    with Memory(tmp_path / "modes.db", embedder=None) as memory:
        first = replay_recording(memory, shared_datasets / BAG, config, options)
        assert first.stats.topics["/mode"].records == 5 and first.stats.episodes_started == 0
        stored = _notes(memory, "modes")
        assert len(stored) == 5 and {n["content"] for n in stored} == {"charging", "navigating"}
        before = memory.stats()
        for _ in range(2):
            again = replay_recording(memory, shared_datasets / BAG, config, options)
            assert again.stats.topics["/mode"].already_stored == 5 and again.stats.records_written == 0
        assert _notes(memory, "modes") == stored  # confidence, evidence count: untouched
        assert memory.stats() == before


def _notes(memory: Memory, collection: str) -> list[dict[str, Any]]:
    found = memory.recall("", collection=collection, n=20, min_confidence=0,
                          context_filter={"source.topic": "/mode"})["results"]
    notes = [memory.get(r["id"]) for r in found]
    keep = ("id", "content", "confidence", "evidence_count")
    return sorted(({k: n[k] for k in keep} for n in notes), key=lambda n: n["id"])


def test_ros1_bag_every_topic_is_read_with_the_recordings_message_counts(shared_datasets: Path, tmp_path: Path) -> None:
    path = shared_datasets / BAG
    memory = Memory(tmp_path / "counts.db", embedder=None)  # ~700 JSON records: vectors would only cost time
    with Ros1Reader(path) as raw:
        expected = {c.topic: 0 for c in raw.connections}
        for connection, _t, _data in raw.messages():
            expected[connection.topic] += 1
    result = replay_recording(memory, path, BridgeConfig(), ReplayOptions(topics=tuple(expected), collection="bag"))
    assert {t: s.messages for t, s in result.stats.topics.items() if s.messages} == expected
    assert expected["/location"] == 5273
    assert result.stats.topics["/location"].converter == "pose_trajectory"
    assert result.stats.topics["/battery"].converter == "json_perception"  # asked for, no rule: sampled JSON
    assert sum(s.malformed for s in result.stats.topics.values()) == 0
    memory.close()


def test_interleaved_location_stream_reports_its_tracks_instead_of_a_nonsense_path_length(
    shared_datasets: Path, memory: Memory
) -> None:
    path = shared_datasets / BAG
    with Ros1Reader(path) as raw:
        conns = [c for c in raw.connections if c.topic == "/location"]
        # naive length straight from the bytes: PoseStamped header(seq, stamp, frame_id='') then x, y, z float64
        points = [np.frombuffer(data, dtype="<f8", count=3, offset=16) for _c, _t, data in raw.messages(conns)]
    naive = _length(np.asarray(points))
    assert naive > 8000  # what summing consecutive messages would claim (the robot drove metres)

    result = replay_recording(memory, path, BridgeConfig(), ReplayOptions(collection="bag"))
    summary = _summary(memory, result.stats.session_ids[0])
    spatial = summary["spatial"]
    assert spatial["path_quality"] == "interleaved"
    assert "path_length_m" not in spatial
    assert "not one physical track" in spatial["path_note"]
    assert len(spatial["tracks"]) == 2
    assert all(1.0 < track["path_length_m"] < 50.0 for track in spatial["tracks"])
    assert "path length not reported" in summary["content"]
    chunks = [m for m in _session_records(memory, result.stats.session_ids[0]) if m["perception_type"] != "procedural"]
    assert all(m["spatial"].get("path_length_m", 0) < 20 for m in chunks)  # no chunk claims kilometres either


def test_gap_episodes_of_the_nav2_mcap_begin_when_the_robot_first_moves(shared_datasets: Path, memory: Memory) -> None:
    # docs/replay.md: an episode begins when the robot moves; stationary messages before count as
    # outside episodes. The robot stands still for its first ~4 s (and /tf switches from odom to
    # map meanwhile, which is no motion); a first "episode" of 2.0 s and 0.0 m used to be stored.
    path = shared_datasets / MCAP
    timed = _raw_odom(path, with_log_time=True)
    threshold = BridgeConfig().motion_threshold_m
    moved = np.linalg.norm(timed[:, :3] - timed[0, :3], axis=1) > threshold
    first_motion_s = timed[int(np.argmax(moved)), 3]
    assert first_motion_s - timed[0, 3] > 2.0  # the gap: longer than the split's seconds

    result = replay_recording(memory, path, BridgeConfig(), ReplayOptions(collection="gap", episode_split="gap:2"))

    starts = [int(s.rpartition("_")[2]) / 1e9 for s in result.stats.session_ids]
    assert starts and starts[0] == pytest.approx(first_motion_s, abs=0.1)
    for session_id in result.stats.session_ids:
        assert _summary(memory, session_id)["spatial"]["path_length_m"] > threshold
    assert result.stats.topics["/odom"].outside_episode > 0
