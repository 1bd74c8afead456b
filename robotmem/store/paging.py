"""Migration steps that rewrite rows a page of ids at a time, each page committed on its own (both stores).

In one transaction, a store of 1,000,000 memories written by the first robotmem was upgraded with
852 MB of SQLite WAL (the store was 560 MB), 709 MB of resident memory (every row read at once) and
the write lock held for 102 s; a process killed at 100 s started over from nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Union

__all__ = ["PAGE_ROWS", "Paged", "Progress", "Step", "run_next_step"]

#: Rows a page of a Paged step reads (a module attribute: tests make it small).
PAGE_ROWS = 5000


class Paged:
    """A step whose ``page(conn, after)`` handles the memories with ids after ``after``, up to
    PAGE_ROWS of them, and returns the last id it read, or None once none is left (the step is then
    done, and its version is recorded in the same transaction). Pages must be safe to run again,
    skipping rows already rewritten: a process killed between pages starts the step again from the
    first id, and another process may run a page of the same step meanwhile."""

    def __init__(self, page: Callable[[Any, int], int | None]) -> None:
        self.page = page


class Progress(NamedTuple):
    """Where an upgrade stands: the store's schema version, and, within its next step if Paged,
    the last id the pages of this process have handled (0: none yet)."""

    version: int
    after: int = 0


def _after_page(progress: Progress | None, current: int) -> int:
    """Where the next page of the step after ``current`` starts: after the ids this process has
    handled, if the store is still at the version it handled them at."""
    return progress.after if progress is not None and progress.version == current else 0


#: A migration step: SQL, a function for what SQL alone cannot do, or a Paged one.
Step = Union[str, Callable[[Any], None], Paged]


def run_next_step(conn: Any, migrations: Sequence[tuple[int, Step]], current: int,
                  progress: Progress | None) -> Progress:
    """Run the step after version ``current`` (versions run 1, 2, ... without gaps), or its next
    page if it is Paged. Progress(current, after) while pages of it are left; Progress(its version)
    once it is done, which the caller records in the same transaction."""
    version, step = migrations[current]
    if isinstance(step, Paged):
        after = step.page(conn, _after_page(progress, current))
        if after is not None:
            return Progress(current, after)
    elif callable(step):
        step(conn)
    else:
        conn.execute(step)
    return Progress(version)
