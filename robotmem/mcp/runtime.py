"""The server's one ``Memory``: opened in the lifespan, off the event loop, closed on shutdown.

``initialize`` must answer at once even on a cold start, so the lifespan does not wait
for anything slow: it starts opening the store on a worker thread and returns. Tool calls
await the store being open; the embedding model starts loading on a thread of its own
before they are let in, so a ``recall`` that comes while it loads answers from full text
(``bm25_only``) instead of loading it itself; ``learn`` waits for it. Every ``Memory`` call runs on
a worker thread (``anyio.to_thread``) so one slow SQLite or ONNX call never stalls the
event loop and the other requests it is serving.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio
import anyio.to_thread

from ..config import Config
from ..errors import RobotMemError, StorageError
from .boundary import log_storage_failure

if TYPE_CHECKING:  # imported late at run time: the core loads heavy modules
    from ..service import Memory

__all__ = ["MemoryRuntime", "open_memory"]

log = logging.getLogger("robotmem.mcp")

T = TypeVar("T")

#: What tool calls import on their first use (``Memory`` imports them late, so that a short CLI
#: command does not pay for them). Imported in a server's warm-up instead: an import holds the GIL,
#: and the first ``end_session`` importing consolidation (scipy) held it for 140-180 ms, a stall
#: of every ``recall`` the server was answering at that moment (docs/benchmarks.md).
LATE_IMPORTS = (
    "robotmem.consolidation",  # end_session
    "robotmem.search.outcomes",  # outcome_stats
    "robotmem.search.outcome_request",
    "faiss",  # recall, once a vector snapshot is published
)


def open_memory(config: Config) -> Memory:
    """The ``Memory`` the server works on (imported late: the core may load heavy modules)."""
    from .. import Memory

    return Memory(path=config.store_location, collection=config.collection, embedder="auto", config=config)


def _import_late() -> None:
    for name in LATE_IMPORTS:
        try:
            importlib.import_module(name)
        except ImportError as exc:  # the tool that needs it reports it when called
            log.warning("cannot import %s ahead of its first use: %s", name, exc)


class _Opened:
    """What opening produced: the memory, or the error of the last attempt."""

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.reopening = anyio.Lock()
        self.memory: Memory | None = None
        self.error: BaseException | None = None
        #: set when the warm-up is over (model loaded or given up, late imports done)
        self.warm = anyio.Event()


class MemoryRuntime:
    """Owns the ``Memory`` for the life of the server and runs calls against it."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._opened: _Opened | None = None
        self.store: Literal["closed", "opening", "ready", "failed"] = "closed"

    @asynccontextmanager
    async def lifespan(self, _server: object = None) -> AsyncIterator[MemoryRuntime]:
        opened = self._opened = _Opened()
        self.store = "opening"
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._open_and_warm, opened)
                try:
                    yield self
                finally:
                    # Opening is not cancellable (its thread runs to the end, so there is a
                    # Memory to close); an unfinished warm-up is abandoned.
                    tasks.cancel_scope.cancel()
        finally:
            # On every way out: SIGTERM, Ctrl-C and a closed stdout end the server by
            # cancelling it, and closing writes what the store still buffers (recall's
            # access counts); a cancelled close would lose it.
            with anyio.CancelScope(shield=True):
                await self._close(opened)
            self._opened = None
            self.store = "closed"

    async def memory(self) -> Memory:
        """The open ``Memory``; waits while it is being opened; retries a failed open."""
        opened = self._opened
        if opened is None:
            raise RuntimeError("the memory runtime is not running (lifespan not entered)")
        await opened.done.wait()
        if opened.memory is None:
            return await self._reopen(opened)
        return opened.memory

    async def _reopen(self, opened: _Opened) -> Memory:
        """Opening failed before: try again, so a server outlives a store that was briefly
        unusable (locked, unmounted, replaced) instead of failing until restarted."""
        async with opened.reopening:
            if opened.memory is not None:
                return opened.memory  # another call reopened it while this one waited
            try:
                memory = opened.memory = await anyio.to_thread.run_sync(open_memory, self.config)
            except Exception as exc:
                opened.error = exc
                raise
            opened.error = None
            self.store = "ready"
            log.info("memory store open at %s (on retry)", self.config.store_label)
            return memory

    async def call(self, fn: Callable[[Memory], T]) -> T:
        """Run ``fn(memory)`` on a worker thread."""
        memory = await self.memory()
        return await anyio.to_thread.run_sync(fn, memory)

    def status(self) -> dict[str, Any]:
        """Store and embedder state, read without waiting for either."""
        return {
            "store": self.store,
            "embeddings": self._embeddings_state(),
            "collection": self.config.collection,
        }

    def _embeddings_state(self) -> str:
        opened = self._opened
        if opened is None or not opened.done.is_set():
            return "pending"
        if opened.memory is None:
            return "unavailable"
        embedder = opened.memory.embedder
        if embedder is None:
            return "off"
        # The ONNX embedder reports unloaded/loading/ready/failed; others load on first use.
        return str(getattr(embedder, "state", "unknown"))

    async def warmed(self) -> None:
        """Wait until the warm-up is over (the model loaded or given up, LATE_IMPORTS imported)."""
        opened = self._opened
        if opened is None:
            raise RuntimeError("the memory runtime is not running (lifespan not entered)")
        await opened.warm.wait()

    async def _open_and_warm(self, opened: _Opened) -> None:
        try:
            await self._open(opened)
        finally:
            opened.warm.set()
            log.info("warm-up over: every tool's modules imported, the embedding model loaded or given up")

    async def _open(self, opened: _Opened) -> None:
        try:
            try:
                memory = opened.memory = await anyio.to_thread.run_sync(open_memory, self.config)
            except Exception as exc:  # tool calls retry and report it; the server keeps answering
                opened.error = exc
                self.store = "failed"
                if isinstance(exc, StorageError):
                    log_storage_failure(f"opening the memory store at {self.config.store_label}", exc)
                else:
                    log.error("cannot open the memory store at %s", self.config.store_label, exc_info=exc)
                return
            self.store = "ready"
            log.info("memory store open at %s", self.config.store_label)
            # Before tool calls are let in (``done``): a recall must find the model loading,
            # not unloaded, or it would load the model itself and keep its caller waiting.
            load = self._start_loading(memory)
        finally:
            opened.done.set()
        # While the model loads on its own thread, before a control loop is likely to be recalling.
        await anyio.to_thread.run_sync(_import_late, abandon_on_cancel=True)
        if load is not None:
            await self._warm_up(memory, load)

    @staticmethod
    def _start_loading(memory: Memory) -> Callable[[], object] | None:
        """Start loading the embedding model; returns what waits for the load to end."""
        embedder = memory.embedder
        if embedder is None:
            return None
        background = getattr(embedder, "warm_in_background", None)
        if background is not None:  # robotmem's ONNX embedders: "loading" as soon as this returns
            loader: threading.Thread = background()
            return loader.join
        # Any other Embedder loads on its first call; it can at least embed one text.
        return getattr(embedder, "warm", None) or (lambda: embedder.embed(["warm-up"]))

    @staticmethod
    async def _warm_up(memory: Memory, load: Callable[[], object]) -> None:
        embedder = memory.embedder
        try:
            await anyio.to_thread.run_sync(load, abandon_on_cancel=True)
        except RobotMemError as exc:
            log.warning("embedding model unavailable, recall uses BM25 only: %s", exc.message)
            return
        except Exception:
            log.exception("embedding model failed to load, recall uses BM25 only")
            return
        # A background loader logs its own failure (once per process) and leaves it in its state.
        if getattr(embedder, "state", "ready") == "ready":
            log.info("embedding model ready (%s)", getattr(embedder, "model_id", "?"))

    @staticmethod
    async def _close(opened: _Opened) -> None:
        if opened.memory is None:
            return
        try:
            await anyio.to_thread.run_sync(opened.memory.close)
        except Exception:
            log.exception("closing the memory store failed")
        else:
            log.info("memory store closed")
