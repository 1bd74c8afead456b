"""The store's view of the embedder: present, absent, or failed once and switched off."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from .. import validation
from ..config import Config
from ..embeddings.base import Embedder
from ..errors import EmbeddingUnavailableError, ValidationError

__all__ = ["QUERY_CACHE_SIZE", "EmbeddingState", "resolve_embedder"]

#: Query vectors kept per embedder (one model each): 1,024 x 384 float32 is 1.5 MB.
QUERY_CACHE_SIZE = 1024

log = logging.getLogger("robotmem.embeddings")


def resolve_embedder(choice: object, config: Config) -> Embedder | None:
    """"auto" -> the packaged ONNX model (None when embeddings are off); None -> no vectors."""
    if choice is None:
        return None
    if isinstance(choice, str):
        if choice != "auto":
            raise ValidationError(f"embedder must be 'auto', None or an Embedder, not {choice!r}", field="embedder")
        if config.embeddings == "off":
            return None
        try:
            from ..embeddings import load_embedder
        except ImportError:  # pragma: no cover - the embeddings package always ships load_embedder
            log.warning("robotmem.embeddings.load_embedder is missing; recall runs bm25_only")
            return None
        return load_embedder(config)
    if not isinstance(choice, Embedder):
        raise ValidationError("embedder must provide model_id, dim and embed(texts)", field="embedder")
    validation.embedder_identity(choice.model_id, choice.dim)
    return choice


class EmbeddingState:
    """Embeds when it can; after the first failure says so once and stays off (bm25_only)."""

    def __init__(self, embedder: Embedder | None) -> None:
        self._embedder = embedder
        self._failed = False
        self._lock = threading.Lock()
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()

    @property
    def available(self) -> bool:
        return self._embedder is not None and not self._failed

    @property
    def model_id(self) -> str | None:
        return self._embedder.model_id if self._embedder is not None else None

    @property
    def dim(self) -> int | None:
        return self._embedder.dim if self._embedder is not None else None

    @property
    def embedder(self) -> Embedder | None:
        return self._embedder

    def embed_query(self, text: str, *, wait: bool = True) -> np.ndarray | None:
        """The vector of one query text, from a bounded cache: a control loop asks the same question every cycle."""
        with self._lock:
            cached = self._queries.get(text)
            if cached is not None:
                self._queries.move_to_end(text)
                return cached
        vectors = self.embed([text], wait=wait)
        if vectors is None:
            return None
        vector: np.ndarray = vectors[0]
        vector.setflags(write=False)  # shared by every caller that asks the same question
        with self._lock:
            self._queries[text] = vector
            if len(self._queries) > QUERY_CACHE_SIZE:
                self._queries.popitem(last=False)
        return vector

    def embed(self, texts: Sequence[str], *, wait: bool = True) -> np.ndarray | None:
        """Vectors for ``texts``, or None when embeddings are unavailable.

        ``wait=False`` (recall) does not wait for a model that another thread is still
        loading (a server warming up): the caller answers from full text meanwhile.
        """
        if not self.available or not texts:
            return None
        assert self._embedder is not None
        if not wait and getattr(self._embedder, "state", "ready") == "loading":
            return None
        try:
            vectors = self._embedder.embed(list(texts))
        except EmbeddingUnavailableError as exc:
            with self._lock:
                if not self._failed:
                    self._failed = True
                    # The embedder has already said why, once per process.
                    log.debug("embeddings unavailable, recall runs bm25_only: %s", exc)
            return None
        # Checked before any caller writes them: the one place an embedder's vectors enter.
        return validation.embedder_vectors(vectors, len(texts), self._embedder.dim, self._embedder.model_id)
