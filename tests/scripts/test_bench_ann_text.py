"""scripts/bench_ann_text.py's own rules, on small hand-made cases."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import bench_ann_text as bench  # noqa: E402


def test_sentences_are_drawn_the_same_for_a_seed_and_differ_across_seeds():
    first = [bench.sentence(np.random.default_rng(i)) for i in range(50)]
    assert first == [bench.sentence(np.random.default_rng(i)) for i in range(50)]
    assert len(set(first)) == 50
    assert all(s.endswith(".") and ";" in s for s in first)


def test_exact_top_keeps_the_best_ten_above_recall_floor():
    matrix = np.vstack([np.tile([1.0, 0, 0, 0], (11, 1)), [[0.1, 1.0, 0, 0]]]).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    ids = np.arange(100, 112)
    top = bench.exact_top(ids, matrix, np.array([1.0, 0, 0, 0], dtype=np.float32))
    assert len(top) == 10 and 111 not in top  # the 12th row (cosine 0.1) is under the floor anyway
    low = bench.exact_top(ids, matrix, np.array([0, 0, 1.0, 0], dtype=np.float32))
    assert low == {}  # nothing reaches 0.2
