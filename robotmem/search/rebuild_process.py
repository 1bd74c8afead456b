"""Rebuild a stale vector snapshot in a process of its own.

The process whose recall notices a stale snapshot (robotmem.search.vectors) starts this module
as a detached child instead of a thread. A thread died with its process: a CLI recall exits
within a tenth of a second while a rebuild takes 20-60 s at a million vectors, so every
short-lived process started the rebuild again and none finished it. A process of its own
outlives its parent, takes no GIL from a server's recalls (their p90 doubled beside a thread
build at a million) and gives its memory (760 MB there) back when it ends. The lock file in
``rebuild_stale`` keeps it to one builder per snapshot, whoever starts it.

What it did (or why it failed) goes to ``rebuild.log`` in the store's ``.vectors`` folder: the
parent may be long gone when it ends.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

from ..store.connection import Database
from .ann_index import index_folder, rebuild_stale

__all__ = ["LOG_MAX_BYTES", "LOG_NAME", "main", "start"]

LOG_NAME = "rebuild.log"
LOG_MAX_BYTES = 1 << 20

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
    """Start rebuilding the snapshot of (collection, model) taken at ``seq``; None for an in-memory store."""
    folder = index_folder(db_path)
    if folder is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    with open(_log_file(folder), "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-c", _CHILD, _IMPORT_ROOT, str(db_path.resolve()), collection, model_id, str(dim),
             str(seq)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out,
            start_new_session=True,  # a Ctrl-C meant for the parent does not stop the build
        )


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
    """``python -m robotmem.search.rebuild_process DB COLLECTION MODEL DIM SEQ``."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(levelname)s %(message)s")
    db_path, collection, model_id, dim, seq = argv
    db = Database(Path(db_path))
    try:
        report = rebuild_stale(db, collection, model_id, int(dim), int(seq))
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
