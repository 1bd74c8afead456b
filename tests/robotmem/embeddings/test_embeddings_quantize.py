"""The int8 weight packing used by the MatMulNBits variant."""

from __future__ import annotations

import numpy as np

from robotmem.embeddings.quantize import BLOCK_SIZE, _quantize_weight


def _dequantize(packed: np.ndarray, scales: np.ndarray, k: int) -> np.ndarray:
    n, blocks, _ = packed.shape
    values = (packed.astype(np.float32) - 128.0) * scales.reshape(n, blocks, 1)
    return values.reshape(n, blocks * BLOCK_SIZE)[:, :k].T


def test_packed_blocks_reproduce_the_weight_within_half_a_step() -> None:
    rng = np.random.default_rng(7)
    weight = rng.normal(0.0, 0.05, size=(96, 10)).astype(np.float32)
    packed, scales = _quantize_weight(weight)
    assert packed.shape == (10, 96 // BLOCK_SIZE, BLOCK_SIZE) and packed.dtype == np.uint8
    assert scales.shape == (10 * 96 // BLOCK_SIZE,)
    step = np.repeat(scales.reshape(10, -1), BLOCK_SIZE, axis=1).T
    assert np.all(np.abs(_dequantize(packed, scales, 96) - weight) <= step / 2 + 1e-7)


def test_a_k_that_is_not_a_multiple_of_the_block_is_zero_padded() -> None:
    weight = np.arange(40 * 3, dtype=np.float32).reshape(40, 3) / 100.0
    packed, scales = _quantize_weight(weight)
    assert packed.shape == (3, 2, BLOCK_SIZE)
    np.testing.assert_allclose(_dequantize(packed, scales, 40), weight, atol=float(scales.max()) / 2 + 1e-7)
    assert np.all(packed[:, 1, 40 - BLOCK_SIZE :] == 128), "padding must dequantize to exactly zero"


def test_an_all_zero_block_stays_exactly_zero() -> None:
    weight = np.zeros((BLOCK_SIZE, 2), dtype=np.float32)
    packed, scales = _quantize_weight(weight)
    assert np.all(packed == 128) and np.all(np.isfinite(scales))
