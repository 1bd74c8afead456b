"""What a process forked from one that has a store open gets (``os.fork``, multiprocessing's "fork"
start method, the Linux default before Python 3.14: a DataLoader's workers, a ProcessPoolExecutor).

The child starts with a copy of the parent's objects but only the thread that forked: the
parent's connections (one PostgreSQL socket, one protocol stream; SQLite locks that belong to the
parent's process), its worker threads (gone in the child, their executors still counting them
idle) and locks another thread held at the fork (held for good in the child). Used in the child,
the parent's PostgreSQL connection interleaved both processes' messages: either side read the
other's rows or failed with "server sent data without prior row description", and the parent's
writes then failed ("current transaction is aborted"). So objects that hold any of these register
here, and in the child they drop what is the parent's (never closing it: closing a PostgreSQL
connection sends the server a Terminate for the parent's session, a claim's included) and open
their own on first use.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["in_child_after_fork", "keep_inherited"]

log = logging.getLogger(__name__)

_RESETS: list[weakref.WeakMethod[Callable[[], None]]] = []

#: The parent's connections, referenced until the child exits so that nothing collects and closes
#: them there (apsw closes a collected connection; its SQLite file locks are the parent's).
_INHERITED: list[Any] = []


def in_child_after_fork(method: Callable[[], None]) -> None:
    """Call the bound ``method`` in the child of every later ``os.fork()`` (held weakly: a closed and
    collected store is not called)."""
    _RESETS.append(weakref.WeakMethod(method))


def keep_inherited(*objects: Any) -> None:
    """Keep the parent's ``objects`` (connections) referenced, unused and unclosed, in this child."""
    _INHERITED.extend(objects)


def _after_fork_in_child() -> None:
    alive = []
    for ref in list(_RESETS):
        method = ref()
        if method is None:
            continue
        alive.append(ref)
        try:
            method()
        except Exception:  # pragma: no cover - one object's reset must not stop the others'
            log.exception("resetting %r after fork failed", method)
    _RESETS[:] = alive


os.register_at_fork(after_in_child=_after_fork_in_child)
