"""Names of the ONNX graph's inputs and output, shared by the builder and the runtime.

Kept apart from ``graph.py`` so running a cached model never imports ``onnx``.
"""

from __future__ import annotations

__all__ = ["ATTENTION_MASK", "INPUT_IDS", "INPUT_NAMES", "OUTPUT_NAME"]

INPUT_IDS = "input_ids"
ATTENTION_MASK = "attention_mask"
INPUT_NAMES = (INPUT_IDS, ATTENTION_MASK)
OUTPUT_NAME = "sentence_embedding"
