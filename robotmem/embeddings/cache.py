"""Build the ONNX model once and keep it in the model cache directory.

The file name carries a hash of the source weights, the builder version and the
precision, so a new weights package or a changed builder never reuses a stale
graph. Writes are atomic (temporary file in the same directory, fsync, rename)
and serialised across processes with an advisory lock, so two processes that
start at once build at most once each and never see a half-written file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import EmbeddingUnavailableError
from .source import INSTALL_HINT, ModelSource, weights_digest

if TYPE_CHECKING:
    import onnx

__all__ = [
    "BUILDER_VERSION",
    "MODEL_NAME",
    "PRECISIONS",
    "Progress",
    "build_model",
    "cached_model_path",
    "ensure_built",
    "ensure_model",
    "print_progress",
]

MODEL_NAME = "all-MiniLM-L6-v2"
#: Bump whenever the graph or the quantisation changes: cached files are then rebuilt.
BUILDER_VERSION = 2
PRECISIONS = ("fp32", "int8")

Progress = Callable[[str], None]


def print_progress(message: str) -> None:
    """Default progress sink: one line on stderr (stdout may carry a protocol, e.g. MCP stdio)."""
    print(f"robotmem: {message}", file=sys.stderr, flush=True)


def cached_model_path(source: ModelSource, cache_dir: Path, precision: str) -> Path:
    _check_precision(precision)
    key = hashlib.sha256(f"{weights_digest(source)}|builder={BUILDER_VERSION}|{precision}".encode()).hexdigest()
    return cache_dir / f"{MODEL_NAME}-{precision}-{key[:16]}.onnx"


def build_model(source: ModelSource, precision: str) -> onnx.ModelProto:
    """Assemble the graph in memory from the installed weights."""
    # Imported here: `onnx` takes half a second to import and only builds need it.
    from safetensors.numpy import load_file

    from .graph import build_encoder_graph, load_bert_shape
    from .quantize import quantize_matmuls_int8

    _check_precision(precision)
    model = build_encoder_graph(load_file(str(source.weights)), load_bert_shape(source.config))
    return quantize_matmuls_int8(model) if precision == "int8" else model


def ensure_model(
    source: ModelSource,
    cache_dir: Path,
    precision: str = "fp32",
    *,
    progress: Progress | None = print_progress,
    rebuild: bool = False,
) -> Path:
    """Return the cached model file, building it first if needed.

    Raises :class:`EmbeddingUnavailableError` when the cache is unwritable or
    the build fails; the message says what to do.
    """
    return ensure_built(cached_model_path(source, cache_dir, precision), lambda: build_model(source, precision),
                        f"{MODEL_NAME}/{precision}", source.weights, f"{INSTALL_HINT} --force-reinstall",
                        progress=progress, rebuild=rebuild)


def ensure_built(
    path: Path, build: Callable[[], onnx.ModelProto], name: str, weights: Path, reinstall: str, *,
    progress: Progress | None = print_progress, rebuild: bool = False,
) -> Path:
    """``path``, built by ``build`` first unless it exists (or ``rebuild``): once across processes
    (a lock file), written atomically. ``name``, ``weights`` and ``reinstall`` go into the messages."""
    if path.is_file() and not rebuild:
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with _exclusive_lock(path.with_name(path.name + ".lock")):
            if path.is_file() and not rebuild:
                return path  # another process finished the build while we waited
            started = time.perf_counter()
            if progress is not None:
                progress(f"building the {name} embedding model (one time) into {path}")
            _write_atomically(path, build().SerializeToString())
            if progress is not None:
                progress(f"embedding model ready in {time.perf_counter() - started:.1f} s")
    except EmbeddingUnavailableError:
        raise
    except OSError as exc:
        raise EmbeddingUnavailableError(
            f"cannot write the embedding model cache {path.parent}: {exc}; "
            "point ROBOTMEM_MODELS_DIR (or ROBOTMEM_HOME) at a writable directory"
        ) from exc
    except Exception as exc:
        raise EmbeddingUnavailableError(
            f"cannot build the embedding model from {weights}: {type(exc).__name__}: {exc}; "
            f"reinstall the weights with `{reinstall}`"
        ) from exc
    return path


def _check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise EmbeddingUnavailableError(
            f"unknown embedding precision {precision!r}; use one of {', '.join(PRECISIONS)} "
            "(ROBOTMEM_EMBEDDING_PRECISION)"
        )


def _write_atomically(path: Path, data: bytes) -> None:
    handle, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as tmp:
            tmp.write(data)
            tmp.flush()
            os.fsync(tmp.fileno())
            os.fchmod(tmp.fileno(), 0o644)  # mkstemp makes 0600; the cache may be shared by services
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise


@contextlib.contextmanager
def _exclusive_lock(lock_path: Path) -> Iterator[None]:
    """Advisory inter-process lock (POSIX flock); without fcntl, the atomic rename alone keeps files whole."""
    try:
        import fcntl
    except ImportError:  # Windows: concurrent builders may both build; the rename still keeps files whole
        yield
        return
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
