"""The small interface the store needs from an embedding model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Embedder"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors.

    ``model_id`` names the model *and* its numerics (for example
    ``"all-MiniLM-L6-v2/fp32"``): vectors are only compared with vectors that carry
    the same id, so changing the model never mixes incompatible spaces.
    Implementations must be thread-safe and may load lazily on first ``embed``.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an array of shape (len(texts), dim), float32, rows of unit length."""
        ...
