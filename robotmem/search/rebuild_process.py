"""Rebuild a stale vector snapshot in a process of its own.

The process whose recall notices a stale snapshot (robotmem.search.vectors) starts this module
as a detached child instead of a thread. A thread died with its process: a CLI recall exits
within a tenth of a second while a rebuild takes 20-60 s at a million vectors, so every
short-lived process started the rebuild again and none finished it. A process of its own
outlives its parent, takes no GIL from a server's recalls (their p90 doubled beside a thread
build at a million) and gives its memory (760 MB there) back when it ends. The build lock
keeps it to one builder per snapshot, whoever starts it. It runs at a lower CPU priority
(``NICENESS``): on a two-core board its k-means took both cores for 20-40 s at a million vectors,
and the control loop's recalls and the bridge's writes beside it are the work that must not wait.

What it did (or why it failed) goes to ``rebuild.log`` in the store's ``.vectors`` folder: the
parent may be long gone when it ends.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

from ..store.connection import Database
from .ann_index import index_folder, rebuild_stale, take_build_lock

__all__ = ["LOG_MAX_BYTES", "LOG_NAME", "NICENESS", "main", "start"]

LOG_NAME = "rebuild.log"
LOG_MAX_BYTES = 1 << 20
#: Added to the builder's nice value: it yields the CPU to every process at the default priority.
NICENESS = 10

log = logging.getLogger(__name__)

# The folder robotmem is imported from, so the child imports the same code as its parent even
# when the parent found it through a path of its own (a test run, a script's sys.path). Put
# first only when needed: first on the path, a site-packages folder would shadow the standard
# library with any backport installed there.
_IMPORT_ROOT = str(Path(__file__).resolve().parents[2])
_CHILD = """
import importlib.util, os, sys
root = sys.argv.pop(1)
spec = importlib.util.find_spec("robotmem")
if spec is None or spec.origin is None or os.path.dirname(os.path.dirname(os.path.realpath(spec.origin))) != root:
    sys.path.insert(0, root)
from robotmem.search.rebuild_process import main
sys.exit(main(sys.argv[1:]))
"""


def start(db_path: Path, collection: str, model_id: str, dim: int, seq: int) -> subprocess.Popen[bytes] | None:
    """Start rebuilding the snapshot of (collection, model) taken at ``seq``; None when a process is
    building one already (or the store is in memory).

    The build lock is taken here and handed to the child, which holds it until it ends: between
    the start of a child and its first line (half a second of imports) no other process can
    start a second one. Several processes notice a stale snapshot within one control cycle."""
    folder = index_folder(db_path)
    if folder is None:
        return None
    lock = take_build_lock(folder, collection, model_id)
    if lock is None:
        return None
    with lock, open(_log_file(folder), "ab") as out:
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, _IMPORT_ROOT, str(db_path.resolve()), collection, model_id, str(dim),
             str(seq), str(lock.fileno())],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, pass_fds=(lock.fileno(),),
            start_new_session=True,  # a Ctrl-C meant for the parent does not stop the build
        )
    _lower_priority(child.pid)
    return child


def _lower_priority(pid: int) -> None:
    """Set from here, not by the child: it is single-threaded until its imports are done (half a
    second), and the threads it starts later (faiss's OpenMP pool) inherit the value. Not
    ``preexec_fn``, which is unsafe in a parent with threads (every server)."""
    if not hasattr(os, "setpriority"):  # pragma: no cover - Windows
        return
    try:
        os.setpriority(os.PRIO_PROCESS, pid, min(19, os.getpriority(os.PRIO_PROCESS, pid) + NICENESS))
    except OSError as exc:  # the child has already gone; a build at full priority is still a build
        log.debug("could not lower the rebuild's priority: %s", exc)


def _log_file(folder: Path) -> Path:
    """The log, started afresh (the last one kept as ``rebuild.log.1``) once it passes ``LOG_MAX_BYTES``:
    a store that cannot be rebuilt logs a traceback a minute for as long as it is recalled."""
    path = folder / LOG_NAME
    try:
        if path.stat().st_size > LOG_MAX_BYTES:
            path.replace(path.with_name(LOG_NAME + ".1"))
    except FileNotFoundError:
        pass
    return path


def main(argv: list[str]) -> int:
    """``python -m robotmem.search.rebuild_process DB COLLECTION MODEL DIM SEQ [LOCK_FD]``: with
    LOCK_FD, the build lock is held on that inherited descriptor (open until this process ends)."""
    # This module's own lines at INFO; other libraries' (faiss says which CPU build it loaded) from WARNING.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(process)d %(levelname)s %(message)s")
    log.setLevel(logging.INFO)
    db_path, collection, model_id, dim, seq = argv[:5]
    db = Database(Path(db_path))
    try:
        report = rebuild_stale(db, collection, model_id, int(dim), int(seq), lock_held=len(argv) > 5)
    except Exception:  # a deleted store or a full disk: the old snapshot stays in use
        log.exception("rebuilding the vector index of %s failed; `robotmem reindex` retries", collection)
        return 1
    finally:
        db.close()
    if report is not None:
        log.info("rebuilt the vector index of %s: %d rows in %.1f s", collection, report.rows, report.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
