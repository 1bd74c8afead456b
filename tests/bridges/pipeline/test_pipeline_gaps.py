"""Gaps: a topic gone quiet, or a disconnection, is recorded; the jump across it is not path."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from pipeline_helpers import T0, S, by_topic, odom, summary_of

from bridges.pipeline import Pipeline
from bridges.pipeline.gaps import GapDetector
from robotmem import Memory


def _drive_with_hole(pipeline: Pipeline, hole_from_s: float, hole_s: float, total_s: float, hz: float = 50.0,
                     speed: float = 1.0) -> np.ndarray:
    """Odometry along +x at ``speed``; no messages in [hole_from_s, hole_from_s + hole_s). Returns fed points."""
    fed = []
    for i in range(int(total_s * hz)):
        t = i / hz
        if hole_from_s <= t < hole_from_s + hole_s:
            continue
        pipeline.feed(odom(T0 + int(t * S), speed * t, 0.0))
        fed.append((t, speed * t))
    return np.asarray(fed)


def _own_length(points: np.ndarray, hole_from_s: float, hole_s: float) -> float:
    """The oracle: the length the robot's received poses cover, each side of the hole on its own."""
    before = points[points[:, 0] < hole_from_s][:, 1]
    after = points[points[:, 0] >= hole_from_s + hole_s][:, 1]
    return float(np.abs(np.diff(before)).sum() + np.abs(np.diff(after)).sum())


def test_a_quiet_stretch_is_a_gap_in_the_episode_and_its_chunk_and_not_path(
        make_pipeline: Callable[..., Pipeline], mem: Memory) -> None:
    pipeline = make_pipeline()
    fed = _drive_with_hole(pipeline, hole_from_s=12.0, hole_s=5.0, total_s=30.0)
    stats = pipeline.close()
    session = stats.session_ids[0]
    summary = summary_of(mem, session)
    gaps = summary["context"]["gaps"]
    assert len(gaps) == 1 and gaps[0]["topic"] == "/odom"
    assert abs(gaps[0]["start"] - (T0 / S + 12.0 - 0.02)) < 1e-6 and abs(gaps[0]["end"] - (T0 / S + 17.0)) < 1e-6
    spatial = summary["context"]["spatial"]
    assert spatial["path_quality"] == "gaps"
    assert abs(spatial["path_length_m"] - _own_length(fed, 12.0, 5.0)) < 1e-6  # 25 m, not 30
    chunks = by_topic(mem, session, "/odom")
    with_gap = [c for c in chunks if c["context"].get("gaps")]
    assert len(with_gap) == 1 and with_gap[0]["context"]["spatial"]["path_quality"] == "gaps"
    start, end = with_gap[0]["context"]["episode"]["t_start_ns"], with_gap[0]["context"]["episode"]["t_end_ns"]
    # a chunk's path starts at the last pose before it (the step into its first pose is travelled)
    first = int(np.searchsorted(fed[:, 0], (start - T0) / S - 1e-9))
    own = fed[max(0, first - 1):][fed[max(0, first - 1):, 0] <= (end - T0) / S + 1e-9]
    assert abs(with_gap[0]["context"]["spatial"]["path_length_m"] - _own_length(own, 12.0, 5.0)) < 1e-6
    assert all(c["context"]["spatial"]["path_quality"] == "ok" for c in chunks if c not in with_gap)


def test_a_disconnection_is_a_gap_of_every_topic(make_pipeline: Callable[..., Pipeline], mem: Memory) -> None:
    pipeline = make_pipeline()
    for i in range(100):
        pipeline.feed(odom(T0 + i * S // 50, i / 50, 0.0))
    pipeline.note_gap(T0 + 2 * S, T0 + int(2.3 * S), "disconnected from rosbridge")
    for i in range(115, 200):  # 0.3 s without data: shorter than the topic's own gap rule
        pipeline.feed(odom(T0 + i * S // 50, i / 50, 0.0))
    stats = pipeline.close()
    summary = summary_of(mem, stats.session_ids[0])
    assert [g["reason"] for g in summary["context"]["gaps"]] == ["disconnected from rosbridge"]
    assert summary["context"]["spatial"]["path_quality"] == "gaps"
    assert abs(summary["context"]["spatial"]["path_length_m"] - (99 / 50 + (199 - 115) / 50)) < 1e-6


def test_the_gap_rule_follows_each_topic_s_own_rate() -> None:
    fast, slow = GapDetector("/joint_states", 1.0, 5.0), GapDetector("/camera", 1.0, 5.0)
    assert [fast.observe(T0 + i * S // 1000) for i in range(100)] == [None] * 100
    assert fast.observe(T0 + int(1.2 * S)) is not None  # 1.1 s after 1 ms messages
    assert [slow.observe(T0 + i * S) for i in range(5)] == [None] * 5
    assert slow.observe(T0 + int(8.9 * S)) is None  # 4.9 s: under five 1 s periods
    assert slow.observe(T0 + 20 * S) is not None
