"""Choosing the embedder for a configuration, and the module-level ``embed()``.

Embedders are stateless apart from the loaded session, so one instance per
(model files, cache, precision, threads) is shared by the whole process: every
``Memory`` in a server or a test run reuses the same loaded model.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..config import Config
from ..errors import ConfigError, EmbeddingUnavailableError
from .base import Embedder
from .cache import MODEL_NAME, PRECISIONS, Progress, print_progress
from .multilingual import INSTALL_HINT as MULTILINGUAL_HINT
from .multilingual import MULTILINGUAL_MODEL, MultilingualEmbedder, multilingual_available
from .onnx_embedder import OnnxEmbedder
from .source import INSTALL_HINT, locate_model_source

__all__ = ["EMBEDDINGS_MODES", "EMBEDDING_MODELS", "embed", "load_embedder"]

log = logging.getLogger("robotmem.embeddings")

EMBEDDINGS_MODES = ("auto", "off")
#: The models ``embedding_model`` may name.
EMBEDDING_MODELS = (MODEL_NAME, MULTILINGUAL_MODEL)

_lock = threading.Lock()
_shared: dict[tuple[Path, Path, str, int | None], OnnxEmbedder] = {}
_multilingual: dict[tuple[Path, int | None], MultilingualEmbedder] = {}
#: Messages already logged in this process: "says so once", not once per Memory.
_already_warned: set[str] = set()


def load_embedder(
    config: Config,
    *,
    search_path: Sequence[str] | None = None,
    threads: int | None = None,
    progress: Progress | None = print_progress,
) -> Embedder | None:
    """The embedder ``config`` asks for, or None for BM25-only recall.

    None when ``config.embeddings == "off"``, or when the model package is not
    installed (then ONE warning says what to install). The model itself loads
    lazily on first use; ``search_path`` replaces ``sys.path`` when looking for the
    model package (a test seam).
    """
    _check_config(config)
    if config.embeddings == "off":
        return None
    if config.embedding_model == MULTILINGUAL_MODEL:
        return _load_multilingual(config.model_cache, threads, progress)
    try:
        source = locate_model_source(search_path)
    except EmbeddingUnavailableError as exc:
        _warn_once(exc.message)
        return None
    key = (source.directory, config.model_cache, config.embedding_precision, threads)
    with _lock:
        embedder = _shared.get(key)
        if embedder is None:
            embedder = OnnxEmbedder(
                source, config.model_cache, precision=config.embedding_precision, threads=threads, progress=progress
            )
            _shared[key] = embedder
        return embedder


def _load_multilingual(cache_dir: Path, threads: int | None, progress: Progress | None) -> Embedder | None:
    if not multilingual_available():
        _warn_once(f"the multilingual embedding model is not installed; run `{MULTILINGUAL_HINT}`")
        return None
    with _lock:
        embedder = _multilingual.get((cache_dir, threads))
        if embedder is None:
            embedder = _multilingual[(cache_dir, threads)] = MultilingualEmbedder(cache_dir, threads=threads,
                                                                                  progress=progress)
        return embedder


def embed(texts: Sequence[str]) -> np.ndarray:
    """Embed ``texts`` with the model of ``Config.load()``: float32 ``(n, 384)``, unit rows.

    Raises :class:`EmbeddingUnavailableError` when embeddings are off or the model
    is not installed, :class:`robotmem.errors.ValidationError` for bad ``texts``.
    """
    config = Config.load()
    embedder = load_embedder(config)
    if embedder is None:
        if config.embeddings == "off":
            raise EmbeddingUnavailableError("embeddings are turned off (ROBOTMEM_EMBEDDINGS=off)")
        hint = MULTILINGUAL_HINT if config.embedding_model == MULTILINGUAL_MODEL else INSTALL_HINT
        raise EmbeddingUnavailableError(f"the embedding model is not installed; run `{hint}`")
    return embedder.embed(texts)


def _check_config(config: Config) -> None:
    if config.embeddings not in EMBEDDINGS_MODES:
        raise ConfigError(
            f"config option 'embeddings' must be one of {', '.join(EMBEDDINGS_MODES)}, got {config.embeddings!r}",
            field="embeddings",
        )
    if config.embedding_model not in EMBEDDING_MODELS:
        raise ConfigError(
            f"config option 'embedding_model' must be one of {', '.join(EMBEDDING_MODELS)}, "
            f"got {config.embedding_model!r}",
            field="embedding_model",
        )
    if config.embedding_precision not in PRECISIONS:
        raise ConfigError(
            f"config option 'embedding_precision' must be one of {', '.join(PRECISIONS)}, "
            f"got {config.embedding_precision!r}",
            field="embedding_precision",
        )


def _warn_once(message: str) -> None:
    with _lock:
        if message in _already_warned:
            return
        _already_warned.add(message)
    log.warning("%s", message)
