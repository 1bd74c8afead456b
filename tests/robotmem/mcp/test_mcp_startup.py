"""Cold start and failure behaviour of the stdio server.

``initialize`` must not wait for the embedding model, and a call stuck behind the model
must not stall other requests. To make "the model is still loading" a fact rather than a
race, the test holds the model cache's build lock (the real inter-process lock the
embedder takes before building into an empty cache) while it talks to the server, and
only then lets the build go ahead.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, get_args

import anyio
import pytest
from mcp_client_helpers import TOOL_NAMES, call_error, call_ok, read_json_resource, stdio_session

from robotmem import Memory
from robotmem.config import Config
from robotmem.embeddings.cache import cached_model_path
from robotmem.embeddings.onnx_embedder import LoadState
from robotmem.embeddings.source import locate_model_source
from robotmem.mcp.runtime import MemoryRuntime

pytestmark = pytest.mark.anyio

#: Upper bound for the model build once released: a hang guard, not a speed assertion.
MODEL_BUILD_TIMEOUT_S = 300


class ModelBuildLock:
    """The lock the embedder must take to build the fp32 model into ``models_dir``."""

    def __init__(self, models_dir: Path) -> None:
        self.models_dir = models_dir
        self.model_file = cached_model_path(locate_model_source(), models_dir, "fp32")
        self._path = self.model_file.with_name(self.model_file.name + ".lock")
        self._handle: IO[bytes] | None = None

    def acquire(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = self._path.open("a+b")
        fcntl.flock(self._handle.fileno(), fcntl.LOCK_EX)

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None


@contextmanager
def model_build_held(tmp_path: Path) -> Iterator[ModelBuildLock]:
    """An empty model cache whose build lock the test holds until it releases it (or ends)."""
    lock = ModelBuildLock(tmp_path / "empty-model-cache")
    lock.acquire()
    try:
        yield lock
    finally:
        lock.release()


async def test_initialize_and_other_calls_answer_while_the_model_is_still_loading(
    robotmem_home: Path, tmp_path: Path
) -> None:
    with model_build_held(tmp_path) as lock:
        async with stdio_session(
            robotmem_home, tmp_path / "server.log", ROBOTMEM_MODELS_DIR=str(lock.models_dir)
        ) as session:
            # initialize has returned (stdio_session awaited it) and the model is not built.
            assert not lock.model_file.exists()
            learned: dict[str, Any] = {}

            async def learn_needing_the_model() -> None:
                learned.update(await call_ok(session, "learn", {"insight": "Embedding waits for the model"}))

            with anyio.fail_after(MODEL_BUILD_TIMEOUT_S):
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(learn_needing_the_model)
                    # Calls that need no model complete while the warm-up and learn wait on it.
                    started = await call_ok(session, "start_session", {"collection": "lab"})
                    ended = await call_ok(session, "end_session", {"session_id": started["session_id"]})
                    assert ended["status"] == "ended"
                    assert (await read_json_resource(session, "robotmem://stats"))["sessions"] == 1
                    status = await read_json_resource(session, "robotmem://status")
                    # The load starts before any call gets the store, so never "unloaded".
                    assert status["store"] == "ready" and status["embeddings"] == "loading"
                    assert learned == {}, "learn cannot finish before the model exists"
                    lock.release()  # let the build go ahead; learn then completes

            assert learned["status"] == "created"
            assert lock.model_file.exists()
            assert (await read_json_resource(session, "robotmem://status"))["embeddings"] == "ready"
            found = await call_ok(session, "recall", {"query": "waiting for the embedding model"})
            assert found["mode"] == "hybrid" and found["results"][0]["id"] == learned["memory_id"]


async def test_an_unreadable_store_gives_storage_errors_without_internals_and_the_server_keeps_answering(
    robotmem_home: Path, tmp_path: Path
) -> None:
    database = robotmem_home / "memory.db"
    database.write_bytes(b"this is not an SQLite database " * 512)
    log = tmp_path / "server.log"
    async with stdio_session(robotmem_home, log, ROBOTMEM_EMBEDDINGS="off") as session:
        for tool, arguments in [("learn", {"insight": "lost?"}), ("recall", {"query": "anything"})]:
            error = await call_error(session, tool, arguments)
            assert error == {"code": "storage_error", "field": None, "message": (
                "the memory store could not complete the request: the file is not a robotmem database; check the path")}
            assert str(robotmem_home) not in error["message"]
        # Argument problems are still reported as such: validation needs no store.
        bad = await call_error(session, "recall", {"query": "x", "n": "many"})
        assert bad["code"] == "validation_error"
        assert {tool.name for tool in (await session.list_tools()).tools} == TOOL_NAMES
        status = await read_json_resource(session, "robotmem://status")
        assert status["store"] == "failed" and status["embeddings"] == "unavailable"
    text = log.read_text(encoding="utf-8")
    assert str(database) in text, "the cause is in the server log"
    # Opening and each of the two failed calls: one line each, no traceback (an expected failure).
    assert len([line for line in text.splitlines() if "storage failure" in line]) == 3
    assert "Traceback" not in text


@pytest.fixture
def full_tmpfs(small_disk: Any) -> Path:
    """A small real disk filled to the last byte; ``folder / "ballast"`` removed frees it."""
    disk = small_disk("4m")
    disk.fill()
    return Path(disk.folder)


async def test_a_server_started_on_a_full_disk_tells_its_client_so_and_serves_once_space_is_freed(
    robotmem_home: Path, tmp_path: Path, full_tmpfs: Path
) -> None:
    """A robot booting with a full card: opening the store fails; the client's error said only that the
    store failed ("the server log has the details"), though it says what to do for a write that fails."""
    log = tmp_path / "server.log"
    database = full_tmpfs / "memory.db"
    async with stdio_session(robotmem_home, log, ROBOTMEM_EMBEDDINGS="off", ROBOTMEM_DB_PATH=str(database)) as session:
        error = await call_error(session, "learn", {"insight": "the dock is behind the shelf"})
        assert error["code"] == "storage_error" and "the disk is full" in error["message"]
        assert "free space" in error["message"] and str(full_tmpfs) not in error["message"]
        (full_tmpfs / "ballast").unlink()
        learned = await call_ok(session, "learn", {"insight": "the dock is behind the shelf"})
        assert learned["status"] == "created"
    with Memory(database, embedder=None) as mem:
        assert [h["content"] for h in mem.recall("dock")["results"]] == ["the dock is behind the shelf"]


def test_docs_mcp_md_lists_every_embeddings_status() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "mcp.md").read_text(encoding="utf-8")
    row = next(line for line in doc.splitlines() if line.startswith("| `robotmem://status`"))
    # MemoryRuntime.status: its own four, and the ONNX embedder's load states
    for value in ("pending", "unavailable", "off", "unknown", *get_args(LoadState)):
        assert f'"{value}"' in row, value


async def test_once_the_store_is_usable_again_calls_succeed_without_a_restart(
    robotmem_home: Path, tmp_path: Path
) -> None:
    database = robotmem_home / "memory.db"
    database.write_bytes(b"this is not an SQLite database " * 512)
    async with stdio_session(robotmem_home, tmp_path / "server.log", ROBOTMEM_EMBEDDINGS="off") as session:
        assert (await call_error(session, "learn", {"insight": "first try"}))["code"] == "storage_error"
        database.unlink()  # an operator moves the broken file away
        learned = await call_ok(session, "learn", {"insight": "second try"})
        assert learned["status"] == "created"
        assert (await read_json_resource(session, "robotmem://status"))["store"] == "ready"


async def test_the_model_is_loading_before_any_tool_call_can_reach_the_store(
    robotmem_home: Path, tmp_path: Path
) -> None:
    # In process, so the embedder's state can be read the moment a tool call would get the
    # store: a recall arriving then must find the model "loading" (and answer from full
    # text), never "unloaded" (it would load the model itself and block the control loop).
    with model_build_held(tmp_path) as lock:
        runtime = MemoryRuntime(Config.load(home=robotmem_home, models_dir=lock.models_dir))
        async with runtime.lifespan():
            memory = await runtime.memory()
            assert memory.embedder is not None
            assert getattr(memory.embedder, "state") == "loading"
            assert memory.recall("anything at all")["mode"] == "bm25_only"
            lock.release()


async def test_the_first_recall_after_initialize_answers_from_full_text_while_the_model_builds(
    robotmem_home: Path, tmp_path: Path
) -> None:
    with Memory(robotmem_home / "memory.db", embedder=None) as text_only:
        stored = text_only.learn("the wet glass bottle slipped at grip force 5 N")["memory_id"]
    with model_build_held(tmp_path) as lock:
        async with stdio_session(robotmem_home, tmp_path / "server.log", ROBOTMEM_MODELS_DIR=str(lock.models_dir)) as session:
            # The build cannot finish while the lock is held: an answer now is one that did not wait.
            with anyio.fail_after(MODEL_BUILD_TIMEOUT_S):  # a hang guard, not a speed assertion
                found = await call_ok(session, "recall", {"query": "wet glass bottle slipped"})
            assert found["mode"] == "bm25_only" and [hit["id"] for hit in found["results"]] == [stored]
            assert not lock.model_file.exists()
            lock.release()
