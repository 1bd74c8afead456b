"""Joint trajectories are downsampled shape-preservingly: spikes and extremes survive, within tolerance."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from pipeline_helpers import T0, joints

from bridges.pipeline import BridgeConfig, Pipeline
from bridges.pipeline.joint_simplify import simplify_joints
from robotmem import Memory

MS = 1_000_000


def _max_error(t: np.ndarray, positions: np.ndarray, rows: np.ndarray) -> float:
    """Largest gap, over joints and raw samples, between the raw signal and the stored one interpolated."""
    return max(float(np.abs(np.interp(t, t[rows], positions[rows, j]) - positions[:, j]).max())
               for j in range(positions.shape[1]))


def test_a_10_ms_excursion_at_1_khz_is_stored_and_described(make_pipeline: Callable[..., Pipeline], mem: Memory) -> None:
    pipeline = make_pipeline()
    for i in range(10_000):  # 10 s at 1 kHz; j0 jumps to 1.5 rad for 10 ms in the middle
        pipeline.feed(joints(T0 + i * MS, [1.5 if 5012 <= i < 5022 else 0.0, 0.0]))
    stats = pipeline.close()
    (chunk,) = [r for r in mem.session_timeline(stats.session_ids[0])["memories"]
                if r["context"]["source"].get("topic") == "/joint_states"]
    data = mem.get_data(chunk["id"])
    stored_j0 = [row[0] for row in data["positions"]]
    assert max(stored_j0) == 1.5 and "largest motion j0 1.50" in chunk["content"]
    assert data["raw_samples"] == 10_000 and len(data["t"]) <= BridgeConfig().joint_max_samples
    t = np.asarray(data["t"])
    spike = t[np.asarray(stored_j0) == 1.5]
    assert spike.min() >= 5.012 - 1e-9 and spike.max() <= 5.021 + 1e-9


def test_a_smooth_trajectory_is_stored_within_the_tolerance_with_far_fewer_samples() -> None:
    t = np.linspace(0.0, 10.0, 10_001)
    positions = np.column_stack([np.sin(t), 0.5 * np.cos(3 * t), np.where(t > 4, 1.0, 0.0)])
    rows, tolerance = simplify_joints(t, positions, 0.01, 500)
    assert tolerance == 0.01 and len(rows) < 500
    assert _max_error(t, positions, rows) <= 0.01 + 1e-12
    for j in range(3):  # each joint's extremes are stored exactly
        assert positions[rows, j].max() == positions[:, j].max()
        assert positions[rows, j].min() == positions[:, j].min()


def test_noise_above_the_tolerance_keeps_the_sample_count_bounded_and_reports_the_tolerance_met() -> None:
    rng = np.random.default_rng(3)
    t = np.linspace(0.0, 10.0, 10_000)
    positions = rng.normal(0.0, 0.2, size=(10_000, 4))
    rows, tolerance = simplify_joints(t, positions, 0.01, 200)
    assert len(rows) <= 200 and tolerance > 0.01
    assert _max_error(t, positions, rows) <= tolerance + 1e-12
    assert positions[rows].max() == positions.max() and positions[rows].min() == positions.min()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(-3.2, 3.2), min_size=3, max_size=3), min_size=1, max_size=300),
       st.sampled_from([0.001, 0.01, 0.1]), st.integers(10, 120))
def test_stored_samples_stay_within_the_tolerance_they_report(
        rows_in: list[list[float]], tolerance: float, limit: int) -> None:
    positions = np.asarray(rows_in, dtype=np.float64)
    t = np.arange(len(positions), dtype=np.float64) * 0.001
    rows, met = simplify_joints(t, positions, tolerance, limit)
    assert len(rows) <= max(limit, 2) and rows[0] == 0 and rows[-1] == len(positions) - 1
    assert np.all(np.diff(rows) > 0)
    assert _max_error(t, positions, rows) <= max(met, tolerance) + 1e-9
