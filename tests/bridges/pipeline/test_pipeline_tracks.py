"""Path geometry: RDP downsampling, and splitting messy pose streams into physical tracks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridges.pipeline.geometry import (
    path_length,
    rdp_mask,
    representative_point,
    yaw_from_quaternions,
)
from bridges.pipeline.tracks import TrackSplitter, judge_tracks, pieces_of

S = 1_000_000_000


def _distance_to_polyline(points: np.ndarray, polyline: np.ndarray) -> np.ndarray:
    best = np.full(len(points), np.inf)
    for a, b in itertools.pairwise(polyline):
        d = b - a
        length_sq = float(d @ d)
        u = np.clip((points - a) @ d / length_sq, 0, 1) if length_sq else np.zeros(len(points))
        best = np.minimum(best, np.linalg.norm(points - (a + u[:, None] * d), axis=1))
    return best


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=3, max_value=300), st.integers(min_value=0, max_value=10_000),
       st.floats(min_value=0.005, max_value=0.5))
def test_rdp_keeps_the_ends_and_every_dropped_point_stays_within_tolerance(n: int, seed: int, tolerance: float) -> None:
    rng = np.random.default_rng(seed)
    points = np.cumsum(rng.normal(0, 0.05, (n, 3)), axis=0)
    keep = rdp_mask(points, tolerance)
    assert keep[0] and keep[-1]
    simplified = points[keep]
    if len(simplified) >= 2:
        assert _distance_to_polyline(points, simplified).max() <= tolerance + 1e-9


def test_rdp_reduces_a_straight_line_to_its_two_ends() -> None:
    line = np.column_stack([np.linspace(0, 10, 500), np.zeros(500), np.zeros(500)])
    assert rdp_mask(line, 0.01).sum() == 2
    assert path_length(line[rdp_mask(line, 0.01)]) == path_length(line) == 10.0


def test_yaw_of_a_quarter_turn_about_z_is_pi_over_two() -> None:
    half = np.sqrt(0.5)
    yaw = yaw_from_quaternions(np.array([0.0]), np.array([0.0]), np.array([half]), np.array([half]))
    assert np.allclose(yaw, np.pi / 2)


def test_the_representative_point_is_a_real_point_nearest_the_centroid() -> None:
    points = np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0], [10, 0, 0]], dtype=float)
    assert representative_point(points).tolist() == [2.0, 0.0, 0.0]


def _split(t_s: np.ndarray, xyz: np.ndarray, chunk: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    splitter = TrackSplitter(max_speed_mps=5.0, jump_tolerance_m=0.5)
    t_ns = (t_s * S).astype(np.int64)
    parts = [(t_ns, xyz)] if not chunk else [(t_ns[i:i + chunk], xyz[i:i + chunk]) for i in range(0, len(t_ns), chunk)]
    ids, steps = zip(*(splitter.assign(t, p, "odom") for t, p in parts))
    return t_ns, np.concatenate(ids), np.concatenate(steps)


def test_a_continuous_drive_is_one_track_with_the_raw_path_length() -> None:
    t = np.arange(0, 20, 0.05)
    xyz = np.column_stack([np.cos(t / 5) * 3, np.sin(t / 5) * 3, np.zeros_like(t)])
    t_ns, ids, steps = _split(t, xyz, chunk=37)
    verdict = judge_tracks(pieces_of(ids, t_ns, steps), "/odom")
    assert verdict.quality == "ok" and verdict.note is None
    assert verdict.path_length_m == pytest.approx(path_length(xyz))


def test_two_interleaved_pose_streams_are_reported_as_two_tracks_without_a_path_length() -> None:
    t = np.arange(0, 30, 0.02)
    a = np.column_stack([0.2 * t, np.zeros_like(t), np.full_like(t, 0.008)])
    b = np.column_stack([0.2 * t + 3.8, np.ones_like(t), np.full_like(t, 0.157)])
    xyz = np.where((np.arange(len(t)) % 2 == 0)[:, None], a, b)  # alternate: every step jumps ~3.9 m
    naive = path_length(xyz)
    t_ns, ids, steps = _split(t, xyz, chunk=100)
    verdict = judge_tracks(pieces_of(ids, t_ns, steps), "/location")
    assert naive > 2000
    assert verdict.quality == "interleaved"
    assert verdict.path_length_m is None
    assert "not one physical track" in (verdict.note or "")
    lengths = sorted(track["path_length_m"] for track in verdict.tracks)
    assert lengths == pytest.approx([6.0, 6.0], rel=0.02)


def test_a_relocalisation_jump_is_left_out_of_the_path_length() -> None:
    t = np.arange(0, 20, 0.1)
    xyz = np.column_stack([0.3 * t, np.zeros_like(t), np.zeros_like(t)])
    xyz[100:, 1] += 12.0  # the localiser jumps 12 m sideways at t = 10 s
    t_ns, ids, steps = _split(t, xyz, chunk=64)
    verdict = judge_tracks(pieces_of(ids, t_ns, steps), "/amcl_pose")
    assert verdict.quality == "discontinuous"
    assert verdict.path_length_m == pytest.approx(0.3 * 19.9, rel=0.01)
    assert "1 jump" in (verdict.note or "")


def test_a_single_glitch_point_is_an_outlier_not_a_track() -> None:
    t = np.arange(0, 10, 0.05)
    xyz = np.column_stack([0.5 * t, np.zeros_like(t), np.zeros_like(t)])
    xyz[77] = [40.0, 40.0, 0.0]
    t_ns, ids, steps = _split(t, xyz)
    verdict = judge_tracks(pieces_of(ids, t_ns, steps), "/odom")
    assert verdict.quality == "outliers_removed"
    assert verdict.path_length_m == pytest.approx(0.5 * 9.95, rel=0.01)


def test_points_in_another_frame_never_continue_a_track() -> None:
    splitter = TrackSplitter(5.0, 0.5)
    t = np.arange(10, dtype=np.int64) * S // 10
    same_place = np.zeros((10, 3))
    ids_odom, _ = splitter.assign(t, same_place, "odom")
    ids_map, _ = splitter.assign(t + S, same_place, "map")
    assert set(ids_odom.tolist()).isdisjoint(ids_map.tolist())
