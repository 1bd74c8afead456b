"""Bulk inserts index a whole batch at once.

While the bulk writer's transaction holds a row in ``leaves_deferred``, the per-row insert
triggers of the leaf index (migration 9) and of full text (migration 10) stand aside; the
batch's leaves and full-text entries are then written by one statement each over the new
id range (leaves in key order, so each index page is touched once per batch instead of once
per row). No other connection ever sees that row, so every other insert, raw SQL included,
still goes through the triggers.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw

from .leaves import INSERT_LEAVES_RANGE

__all__ = ["DEFER_FULL_TEXT", "insert_deferring_indexes"]

# Migration 10: migration 1's full-text insert trigger, standing aside for bulk inserts.
# Safe to run again (tests rewind user_version).
DEFER_FULL_TEXT = """
DROP TRIGGER IF EXISTS memories_ai;
CREATE TRIGGER memories_ai AFTER INSERT ON memories
    WHEN new.status IN ('active', 'archived') AND NOT EXISTS (SELECT 1 FROM leaves_deferred) BEGIN
    INSERT INTO memories_fts(rowid, search_text) VALUES (new.id, new.search_text);
END;
"""

_FULL_TEXT_RANGE = (
    "INSERT INTO memories_fts(rowid, search_text) SELECT id, search_text FROM memories "
    "WHERE id BETWEEN ? AND ? AND status IN ('active', 'archived')"
)


def insert_deferring_indexes(conn: apsw.Connection, insert: Callable[[], list[int]]) -> list[int]:
    """Run ``insert`` (new memories, ids ascending) with the per-row leaf and full-text triggers off,
    then index every id it returned, one statement per index. Call inside a write transaction."""
    conn.execute("INSERT INTO leaves_deferred (id) VALUES (1)")
    try:
        ids = insert()
    finally:
        conn.execute("DELETE FROM leaves_deferred")
    if ids:
        # Ids only grow and the write lock is held: the range holds exactly the new rows.
        conn.execute(INSERT_LEAVES_RANGE, (ids[0], ids[-1]))
        conn.execute(_FULL_TEXT_RANGE, (ids[0], ids[-1]))
    return ids
