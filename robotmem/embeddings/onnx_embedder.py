"""all-MiniLM-L6-v2 on ONNX Runtime: the :class:`~robotmem.embeddings.Embedder` robotmem uses, and
``SessionEmbedder``, what it shares with multilingual-e5-small (robotmem.embeddings.multilingual).

Construction is cheap and never touches the model. The first ``embed`` (or
``warm()``, or the thread started by ``warm_in_background()``) builds the graph
into the cache if needed and opens the session; concurrent callers wait for that
one load. A failed load is remembered: it is logged once and later calls raise
the same :class:`EmbeddingUnavailableError` at once instead of trying again.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np

from ..errors import EmbeddingUnavailableError, ValidationError
from .cache import MODEL_NAME, Progress, ensure_model, print_progress
from .signature import ATTENTION_MASK, INPUT_IDS, OUTPUT_NAME
from .source import ModelSource
from .tokenize import WordPiece

if TYPE_CHECKING:
    import onnxruntime as ort

__all__ = ["DEFAULT_BATCH_SIZE", "DIM", "SELF_TEST_SENTENCE",
           "OnnxEmbedder", "SessionEmbedder", "Tokenizer", "default_thread_count",
           "embed_token_ids", "open_session", "validate_texts"]

log = logging.getLogger("robotmem.embeddings")

DIM = 384
#: Embedded by every load (and so by ``robotmem model build``) to prove the model runs.
SELF_TEST_SENTENCE = "robotmem model self-test"
DEFAULT_BATCH_SIZE = 32
#: More intra-op threads stop paying off for a 6-layer model and would starve the
#: robot's other processes; on the 2-core target this is simply "both cores".
_MAX_THREADS = 4

LoadState = Literal["unloaded", "loading", "ready", "failed"]


def default_thread_count() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, _MAX_THREADS))


class Tokenizer(Protocol):
    def token_ids(self, texts: Sequence[str]) -> list[list[int]]: ...


@dataclass(frozen=True)
class _Runtime:
    session: ort.InferenceSession
    tokenizer: Tokenizer
    model_path: Path


class SessionEmbedder:
    """What every robotmem sentence encoder shares: thread-safe, float32 unit vectors of ``dim``
    384; the model is built into ``cache_dir`` (once, across processes) and opened on the first
    ``embed``, ``warm()`` or ``warm_in_background()``, concurrent first callers waiting for that one
    load; a damaged cached file (one that does not match its build's digest, does not open or
    does not embed a test sentence into a finite unit vector) is rebuilt once; a failed load is
    logged once and raised again at once. A model supplies ``model_id``, its tokenizer and its cached file (``_tokenizer``, ``_build``)."""

    #: Worker threads busy-wait between a run's operators (open_session).
    _spinning = False

    def __init__(self, cache_dir: Path, *, threads: int | None = None, batch_size: int = DEFAULT_BATCH_SIZE,
                 progress: Progress | None = print_progress) -> None:
        if batch_size < 1:
            raise ValidationError("batch_size must be at least 1", field="batch_size")
        self._cache_dir = Path(cache_dir)
        self._threads = threads if threads is not None else default_thread_count()
        self._batch_size = batch_size
        self._progress = progress
        self._lock = threading.Lock()
        self._runtime: _Runtime | None = None
        self._failure: EmbeddingUnavailableError | None = None
        self._loading = False

    # -- the Embedder protocol ------------------------------------------------------------
    @property
    def model_id(self) -> str:
        raise NotImplementedError

    @property
    def dim(self) -> int:
        return DIM

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in length-sorted batches; returns float32 ``(len(texts), 384)``."""
        validate_texts(texts)
        if len(texts) == 0:
            return np.zeros((0, DIM), dtype=np.float32)
        runtime = self._loaded()
        return embed_token_ids(runtime.session, runtime.tokenizer.token_ids(texts), self._batch_size)

    # -- loading --------------------------------------------------------------------------
    @property
    def state(self) -> LoadState:
        if self._runtime is not None:
            return "ready"
        if self._failure is not None:
            return "failed"
        return "loading" if self._loading else "unloaded"

    @property
    def model_path(self) -> Path | None:
        """The ONNX file in use, once loaded."""
        return self._runtime.model_path if self._runtime is not None else None

    def warm(self) -> None:
        """Load now (build the model if needed); raises EmbeddingUnavailableError on failure."""
        self._loaded()

    def warm_in_background(self) -> threading.Thread:
        """Load on a daemon thread so a server can start serving at once; failures are logged.

        The state is "loading" from the moment this returns, not only once the thread has
        taken the load lock: a recall that does not wait for the model (``wait=False``)
        arriving in between would otherwise see "unloaded", load the model itself and block.
        """
        if self._runtime is None and self._failure is None:
            self._loading = True

        def load_quietly() -> None:
            try:
                self._loaded()
            except EmbeddingUnavailableError:
                pass  # already logged once by _loaded; embed() re-raises it to callers

        thread = threading.Thread(target=load_quietly, name="robotmem-embedder-load", daemon=True)
        thread.start()
        return thread

    def _loaded(self) -> _Runtime:
        runtime = self._runtime
        if runtime is not None:
            return runtime
        with self._lock:
            if self._runtime is not None:
                return self._runtime
            if self._failure is not None:
                raise self._failure
            self._loading = True
            try:
                self._runtime = self._load()
            except EmbeddingUnavailableError as exc:
                self._failure = exc
                log.warning("embeddings unavailable, recall uses BM25 only: %s", exc.message)
                raise
            finally:
                self._loading = False
            return self._runtime

    def _load(self) -> _Runtime:
        tokenizer = self._tokenizer()
        path = self._build(rebuild=False)
        try:
            session = self._open_checked(path, tokenizer)
        except Exception as first_error:  # noqa: BLE001 - a damaged cache file: rebuild it once
            log.warning("cached embedding model %s is unusable (%s); rebuilding it", path, first_error)
            path = self._build(rebuild=True)
            try:
                session = self._open_checked(path, tokenizer)
            except Exception as exc:
                import onnxruntime

                raise EmbeddingUnavailableError(
                    f"onnxruntime {onnxruntime.__version__} cannot run the embedding model {path}: {exc}"
                ) from exc
        return _Runtime(session=session, tokenizer=tokenizer, model_path=path)

    def _open_checked(self, path: Path, tokenizer: Tokenizer) -> ort.InferenceSession:
        """The session, once it has embedded a fixed sentence into a finite unit vector: the cache's
        digest proves the file is what was built, this proves what was built runs (a few ms)."""
        session = self._open_session(path)
        probe = embed_token_ids(session, tokenizer.token_ids([SELF_TEST_SENTENCE]), 1)
        if not np.isfinite(probe).all():
            raise ValueError("the self-test sentence gave NaN or infinite values")
        if abs(float(np.linalg.norm(probe)) - 1.0) > 1e-3:
            raise ValueError("the self-test sentence gave a vector that is not of unit length")
        return session

    def _open_session(self, path: Path) -> ort.InferenceSession:
        return open_session(str(path), self._threads, spinning=self._spinning)

    def _tokenizer(self) -> Tokenizer:
        """The model's tokenizer; EmbeddingUnavailableError when it cannot be read."""
        raise NotImplementedError

    def _build(self, *, rebuild: bool) -> Path:
        """The model's cached ONNX file, built first when missing (or ``rebuild``)."""
        raise NotImplementedError


class OnnxEmbedder(SessionEmbedder):
    """all-MiniLM-L6-v2, built from the installed weights package (``source``)."""

    def __init__(
        self,
        source: ModelSource,
        cache_dir: Path,
        *,
        precision: str = "fp32",
        threads: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        progress: Progress | None = print_progress,
    ) -> None:
        super().__init__(cache_dir, threads=threads, batch_size=batch_size, progress=progress)
        self._source = source
        self._precision = precision

    @property
    def model_id(self) -> str:
        return f"{MODEL_NAME}/{self._precision}"

    @property
    def precision(self) -> str:
        return self._precision

    def _tokenizer(self) -> Tokenizer:
        try:
            return WordPiece(self._source.tokenizer)
        except Exception as exc:
            raise EmbeddingUnavailableError(f"cannot read the tokenizer {self._source.tokenizer}: {exc}") from exc

    def _build(self, *, rebuild: bool) -> Path:
        return ensure_model(self._source, self._cache_dir, self._precision, progress=self._progress, rebuild=rebuild)


def open_session(model: str | bytes, threads: int, *, spinning: bool = False) -> ort.InferenceSession:
    """An ONNX Runtime session for a sentence encoder (a file, or the serialised model); ``spinning``:
    worker threads busy-wait between the ops of a run instead of sleeping (see below)."""
    import onnxruntime as ort  # imported when the model loads: most commands never embed

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # MiniLM: no busy-waiting. On a 2-core robot, spinning threads steal CPU from the rest of
    # the stack (and from concurrent callers) for no gain in latency (measured: same p50, lower
    # p90 and about 40% less CPU per call; docs/embeddings.md). The twice as deep e5 waits
    # between twice as many ops: there spinning is 35% faster at the same CPU per call.
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: optimiser notes are not user-facing
    return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])


def embed_token_ids(session: ort.InferenceSession, token_ids: list[list[int]], batch_size: int) -> np.ndarray:
    """Unit-length float32 rows ``(len(token_ids), 384)`` from a sentence encoder's session, in
    length-sorted batches: sorting by length keeps padding (wasted attention work) small in bulk calls."""
    order = sorted(range(len(token_ids)), key=lambda i: len(token_ids[i]))
    out = np.empty((len(token_ids), DIM), dtype=np.float32)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        batch = WordPiece.pad([token_ids[i] for i in chunk])
        feeds = {INPUT_IDS: batch.input_ids, ATTENTION_MASK: batch.attention_mask}
        out[chunk] = session.run([OUTPUT_NAME], feeds)[0]
    return out


def validate_texts(texts: Sequence[str]) -> None:
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
        raise ValidationError(
            f"texts must be a list of strings, got {type(texts).__name__}", field="texts"
        )
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValidationError(f"texts[{i}] must be a string, got {type(text).__name__}", field=f"texts[{i}]")
