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

