"""Thread churn: every short-lived thread that touches the store must give its files back."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from robotmem import Memory


def _open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


def _burst(memory: Memory, threads: int) -> None:
    def work(i: int) -> None:
        memory.recall("grip the cup", n=3)
        if i % 4 == 0:
            memory.learn(f"thread {i} saw the cup on the shelf")

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def test_open_files_stay_flat_whatever_the_thread_churn(tmp_path: Path) -> None:
    with Memory(tmp_path / "churn.db", embedder=None) as memory:
        memory.learn("grip the cup with twelve newtons")
        _burst(memory, 20)
        settled = _open_files()
        for _ in range(10):
            _burst(memory, 20)
        # Each leaked connection holds three files (database, WAL, shared memory): 200
        # retired threads would add hundreds. A few spare files are allowed for the
        # interpreter's own (a thread's finalizer may still be pending).
        assert _open_files() <= settled + 3, f"open files grew from {settled} to {_open_files()}"
    assert _open_files() < settled


def test_closed_stores_are_not_kept_alive_by_the_thread_that_used_them(tmp_path: Path) -> None:
    import gc
    import weakref

    closed = []
    for i in range(20):
        memory = Memory(tmp_path / f"store{i}.db", embedder=None)
        memory.recall("anything at all", n=1)
        memory.close()
        closed.append(weakref.ref(memory._db))
        del memory
    gc.collect()
    assert sum(ref() is not None for ref in closed) == 0
