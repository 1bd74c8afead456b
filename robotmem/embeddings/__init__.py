"""Offline text embeddings (ONNX Runtime). See docs/embeddings.md.

The names below load on first use: ``robotmem model status`` and the command-line help
import ``embeddings.cache`` without pulling numpy and ONNX Runtime in with the package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import Embedder
    from .factory import embed, load_embedder
    from .onnx_embedder import DIM, OnnxEmbedder

__all__ = ["DIM", "Embedder", "OnnxEmbedder", "embed", "load_embedder"]

_HOMES = {"Embedder": ".base", "embed": ".factory", "load_embedder": ".factory", "DIM": ".onnx_embedder",
          "OnnxEmbedder": ".onnx_embedder"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name], __name__), name)
