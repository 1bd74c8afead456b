"""Build the ONNX model once and keep it in the model cache directory.

The file name carries a hash of the source weights, the builder version and the
precision, so a new weights package or a changed builder never reuses a stale
graph. Writes are atomic (temporary file in the same directory, fsync, rename)
and serialised across processes with an advisory lock, so two processes that
start at once build at most once each and never see a half-written file.

A file that still loads can still be damaged (a bad sector, a copy that went wrong in the
middle): ONNX Runtime runs it and returns NaN or, worse, finite vectors that are simply wrong.
So every build records the SHA-256 of the bytes it meant to write in a sidecar
(``<file>.sha256``, written atomically after the file) and every load checks the file against
it; a mismatch is rebuilt once, with a warning. A full digest is the only check that sees a
few flipped bytes anywhere in 90 MB; it costs about a third to a half of what opening the
ONNX Runtime session costs (docs/embeddings.md has the measurement). A file without a sidecar
(built by an older robotmem, or a build killed between the two renames) is verified once by
building the model in memory and comparing the bytes: the build is deterministic, so equal
bytes prove the file whole, and the sidecar is written then.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..errors import EmbeddingUnavailableError
from .source import INSTALL_HINT, ModelSource, read_digest, weights_digest

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
    "file_state",
    "print_progress",
]

MODEL_NAME = "all-MiniLM-L6-v2"
#: Bump whenever the graph or the quantisation changes: cached files are then rebuilt.
BUILDER_VERSION = 2
PRECISIONS = ("fp32", "int8")

Progress = Callable[[str], None]
#: What a cached file is, for ``robotmem model status|build``: "missing"; "verified" (matches
#: its sidecar); "unverified" (no readable sidecar: checked by the next load); "damaged".
FileState = Literal["missing", "verified", "unverified", "damaged"]

log = logging.getLogger("robotmem.embeddings")


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
    """``path``, whole: built by ``build`` first unless it exists and matches the digest recorded
    when it was built (or ``rebuild``); once across processes (a lock file), written atomically.
    A damaged file is rebuilt with a warning. ``name``, ``weights`` and ``reinstall`` go into the
    messages."""
    if not rebuild and file_state(path) == "verified" and not _temporaries(path):
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with _exclusive_lock(path.with_name(path.name + ".lock")) as locked:
            if locked:
                _sweep_temporaries(path)
            state = "missing" if rebuild else file_state(path)
            if state == "verified":
                return path  # another process built or repaired it while we waited
            started = time.perf_counter()
            if state == "unverified":
                if progress is not None:
                    progress(f"verifying the cached {name} embedding model {path} (once: it has no digest yet)")
                data = build().SerializeToString()
                if _matches(path, data):
                    _record_digest(path, data)
                    return path
                log.warning("cached embedding model %s differs from what the weights build (damaged); "
                            "rebuilding it", path)
            else:
                if state == "damaged":
                    log.warning("cached embedding model %s does not match the digest recorded when it was "
                                "built (damaged); rebuilding it", path)
                if progress is not None:
                    progress(f"building the {name} embedding model (one time) into {path}")
                data = build().SerializeToString()
            _write_atomically(path, data)
            _write_atomically(_digest_path(path), _digest_line(data))
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


def file_state(path: Path) -> FileState:
    """Whether the cached ``path`` is there and matches the digest its build recorded (reads it whole)."""
    try:
        size = path.stat().st_size
    except OSError:  # not there, or no folder to hold it: building says what is wrong
        return "missing"
    try:
        recorded = _digest_path(path).read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        recorded = []
    if len(recorded) != 2 or not recorded[1].isdigit():
        return "unverified"
    if int(recorded[1]) != size:
        return "damaged"
    try:
        digest = read_digest(path)
    except OSError:  # a bad sector (EIO): as damaged as a wrong byte
        return "damaged"
    return "verified" if digest == recorded[0] else "damaged"


def _digest_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _digest_line(data: bytes) -> bytes:
    return f"{hashlib.sha256(data).hexdigest()} {len(data)}\n".encode("ascii")


def _matches(path: Path, data: bytes) -> bool:
    return read_digest(path) == hashlib.sha256(data).hexdigest()


def _record_digest(path: Path, data: bytes) -> None:
    """The sidecar of a file just proved whole; in a read-only cache it cannot be written, and the
    proof (a build) is then repeated by every process that loads the file."""
    try:
        _write_atomically(_digest_path(path), _digest_line(data))
    except OSError as exc:
        log.warning("cannot record the digest of the verified embedding model %s (%s): every start will "
                    "verify it again by building it; run `robotmem model build` on a writable cache", path, exc)


def _temporaries(path: Path) -> list[os.DirEntry[str]]:
    """The temporary files of ``path`` and its digest beside it (``_write_atomically``'s names)."""
    prefix = path.name + "."
    try:
        return [entry for entry in os.scandir(path.parent)
                if entry.name.startswith(prefix) and entry.name.endswith(".tmp")]
    except OSError:
        return []


def _sweep_temporaries(path: Path) -> None:
    """Remove the temporary files a killed build of ``path`` left (a first-use build stopped by
    SIGKILL leaves a 77 MB one). Called with the build lock held: every writer creates its
    temporary files only while holding that lock, so none of them can belong to a live build.
    whole_file's sweep locks each temporary file instead, because export has no such lock."""
    stale = _temporaries(path)
    for entry in stale:
        try:
            os.unlink(entry.path)
        except OSError:
            continue
        log.info("removed %s, left by a build of the embedding model that was killed", entry.path)


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
def _exclusive_lock(lock_path: Path) -> Iterator[bool]:
    """Advisory inter-process lock (POSIX flock), yielding whether it is held; without fcntl, the
    atomic rename alone keeps files whole."""
    try:
        import fcntl
    except ImportError:  # Windows: concurrent builders may both build; the rename still keeps files whole
        yield False
        return
    try:
        handle = open(lock_path, "a+b")
    except OSError:  # a read-only cache: nothing can be written there, so no builder needs excluding
        yield False
        return
    with handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
