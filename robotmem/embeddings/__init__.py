"""Offline text embeddings (ONNX Runtime). See docs/embeddings.md."""

from .base import Embedder

__all__ = ["Embedder"]
