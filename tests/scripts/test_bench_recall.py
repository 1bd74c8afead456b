"""The benchmark's own measuring rules (scripts/bench_recall.py), on small hand-made cases."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import bench_recall as bench  # noqa: E402


def _ref(vectors: list[list[float]]) -> dict[str, np.ndarray]:
    matrix = np.asarray(vectors, dtype=np.float32)
    return {"ids": np.arange(1, len(matrix) + 1), "matrix": matrix / np.linalg.norm(matrix, axis=1, keepdims=True)}


def test_exact_top_keeps_the_best_k_above_the_floor_with_their_cosines():
    ref = _ref([[1, 0], [0.9, 0.1], [0, 1], [-1, 0]])
    top = bench.exact_top(ref, np.array([1.0, 0.0], dtype=np.float32), None, k=3)
    assert set(top) == {1, 2}  # the third best (cosine 0) is under recall's 0.2 floor
    assert abs(top[1] - 1.0) < 1e-6
    masked = bench.exact_top(ref, np.array([1.0, 0.0], dtype=np.float32), np.array([False, True, True, True]), k=3)
    assert set(masked) == {2}


def test_agreement_counts_a_tie_with_the_kth_as_the_row_it_displaced():
    expected = {1: 0.9, 2: 0.8, 3: 0.7}
    exact = [{"id": 1, "similarity": 0.9}, {"id": 2, "similarity": 0.8}, {"id": 3, "similarity": 0.7}]
    assert bench.agreement(expected, exact) == 1.0
    tie = exact[:2] + [{"id": 9, "similarity": 0.7}]  # an equal vector stored twice
    assert bench.agreement(expected, tie) == 1.0
    miss = exact[:2] + [{"id": 9, "similarity": 0.65}]
    assert abs(bench.agreement(expected, miss) - 2 / 3) < 1e-9
    assert bench.agreement(expected, exact[:1] + [{"id": 8, "similarity": None}]) == 1 / 3


def test_the_empty_store_reference_times_five_batches_of_a_new_store(tmp_path, monkeypatch):
    monkeypatch.setattr(bench.tempfile, "TemporaryDirectory", lambda: _Keep(tmp_path))
    centres = np.random.default_rng(0).standard_normal((bench.CENTRES, bench.DIM)).astype(np.float32)
    times, pipelined = bench.empty_store_batches(np.random.default_rng(1), centres, 100_000)
    assert len(times) == 5 and all(t > 0 for t in times) and pipelined > 0
    from robotmem import Memory

    with Memory(tmp_path / "empty.db", embedder=bench.BenchVectors()) as mem:
        # The unmeasured first batch, the five, and five more through the bulk writer, each with a vector.
        assert mem.stats()["perceptions"] == 11_000
        assert sum(mem.stats()["embeddings"].values()) == 11_000


class _Keep:
    """A TemporaryDirectory stand-in that keeps the folder, so the test can open the store."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        return str(self.path)

    def __exit__(self, *exc):
        return False


def test_generate_writes_every_record_once_in_order_with_its_vector(tmp_path):
    centres = np.random.default_rng(0).standard_normal((bench.CENTRES, bench.DIM)).astype(np.float32)
    rate = bench.generate(tmp_path / "gen.db", 3000, centres)
    assert rate > 0
    from robotmem import Memory

    with Memory(tmp_path / "gen.db", embedder=bench.BenchVectors()) as mem:
        assert mem.stats()["perceptions"] == 3000 and sum(mem.stats()["embeddings"].values()) == 3000
        assert [mem.get(i)["content"].split(":")[0] for i in (1, 1001, 3000)] == [
            "episode 0", "episode 1000", "episode 2999"]
