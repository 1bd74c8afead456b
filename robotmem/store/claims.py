"""Claims: a name held by one process at a time among all that use a store (``Store.claim``).

A claim must end with the process that holds it, however it ends: a replay killed inside an
episode leaves its session open, and the next replay must be able to tell "left by a process
that died" (rewrite it) from "being written by a process that runs" (keep out). So a claim is
never a row with a heartbeat or a pid, which a dead holder leaves behind; it is held by the
operating system or the database for as long as the holder's file or connection is open:

* SQLite: an exclusive ``flock`` on a file beside the store (``memory.db-claim-<hash>``).
  The kernel drops it when the process dies. The holder removes the file when it lets go.
* PostgreSQL (postgres/connection.py): an advisory lock of a transaction left open on a
  connection of its own, which the server drops when that connection ends, from any host of a
  fleet, also behind a pooler in transaction mode.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Callable
from pathlib import Path

from ..errors import StorageError

try:
    import fcntl
except ImportError:  # Windows: no flock; a claim there always succeeds (see claim_file)
    fcntl = None  # type: ignore[assignment]

__all__ = ["Release", "claim_file", "claim_key", "in_this_process"]

#: lets go of a claim
Release = Callable[[], None]


def claim_key(name: str) -> bytes:
    """The 8 bytes naming a claim (file names, PostgreSQL's bigint advisory-lock key)."""
    return hashlib.sha256(b"robotmem claim\0" + name.encode("utf-8", "surrogatepass")).digest()[:8]


def claim_file(store_path: Path, name: str) -> Release | str:
    """Claim ``name`` for the SQLite store at ``store_path``: the release, or who holds it (text).

    An in-memory store (``:memory:``) is this process's alone: nothing to exclude. Without
    flock (Windows) nothing is excluded either; the store's own locking still keeps every write
    whole, only two replays of one recording may then both write it."""
    if str(store_path) == ":memory:" or fcntl is None:
        return lambda: None
    path = store_path.with_name(f"{store_path.name}-claim-{claim_key(name).hex()}")
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StorageError(f"cannot create the claim file {path}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            return holder or "another process"
        try:
            current = os.stat(path).st_ino
        except FileNotFoundError:
            current = None
        if current != os.fstat(fd).st_ino:
            os.close(fd)  # its holder removed it as we opened it: claim the file there now
            continue
        os.ftruncate(fd, 0)
        os.write(fd, f"process {os.getpid()} on {socket.gethostname()}\n".encode())
        return in_this_process(_releaser(path, fd))


def in_this_process(release: Release) -> Release:
    """``release``, which does nothing in a process forked from the holder's: a child leaving the
    block it was forked in (or exiting through it) let go of the parent's claim while the parent
    still ran inside it, and a second holder could claim it."""
    holder = os.getpid()

    def release_here() -> None:
        if os.getpid() == holder:
            release()

    return release_here


def _releaser(path: Path, fd: int) -> Release:
    released = False

    def release() -> None:
        nonlocal released
        if released:
            return
        released = True
        # Removed while still locked: whoever opened it meanwhile sees it gone and starts over.
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        os.close(fd)

    return release


def _read_holder(fd: int) -> str:
    try:
        return os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""
