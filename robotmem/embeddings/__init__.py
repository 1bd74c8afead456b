"""Offline text embeddings (ONNX Runtime). See docs/embeddings.md."""

from .base import Embedder
from .factory import embed, load_embedder
from .onnx_embedder import DIM, OnnxEmbedder

__all__ = ["DIM", "Embedder", "OnnxEmbedder", "embed", "load_embedder"]
