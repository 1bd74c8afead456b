"""Copy one store into another (SQLite -> PostgreSQL and back): ``robotmem migrate``.

Streaming: memories are read and written in batches of ``batch`` in id order, each batch
one write transaction on the target, so memory use stays flat and a stop (Ctrl-C, a lost
connection) loses at most the batch in flight. Ids are kept, so running it again
continues after the last memory the target holds. Vectors, payloads and every
bookkeeping column are copied as stored: nothing is re-embedded or re-scored.
Into PostgreSQL, vectors are loaded without their HNSW index, which is built once at the end.
``superseded_by`` links are set at the end, when every memory they point at exists.
The links an import stopped half-way left waiting (``import_links``: a memory id, kept, and
its targets' uids, kept too) are copied as they are, so running that import again against
the target finishes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ConflictError
from .backend import Store
from .copy_duplicates import keep_as_merged, point_at_live_targets, second_live_copy
from .rows import OLD_RULE_COLUMNS, same_memory

__all__ = ["copy_store"]

Progress = Callable[[int, int], None]

# The columns that say which memory a row is (rows.same_memory).
_IDENTITY = ("id", "uid", *OLD_RULE_COLUMNS)


def copy_store(source: Store, target: Store, *, batch: int = 500, progress: Progress | None = None) -> dict[str, Any]:
    with source.read() as conn:
        total, last_source = (int(v or 0) for v in conn.execute("SELECT count(*), max(id) FROM memories").fetchone())
        sessions = source.all_sessions(conn)
    start = _resume_point(source, target)
    with target.write() as conn:
        new_sessions = sum(int(target.insert_session_row(conn, s)) for s in sessions)
    done = _count_upto(source, start)
    if progress is not None:
        progress(done, total)
    copied = merged = 0
    after = start
    while after < last_source:
        with source.read() as conn:
            rows = source.iter_rows(conn, after, batch)
        if not rows:
            break
        with target.write() as conn:
            vectors = []
            for record in rows:
                live = second_live_copy(target, conn, record)
                new_id = None if live is not None else _copy_one(target, conn, record)
                if new_id is None:  # a second live copy of a fact: merged into the first, on any target
                    new_id = keep_as_merged(target, conn, record, live)
                    merged += 1
                copied += 1
                if record["embedding"] is not None:
                    model_id, blob = record["embedding"]
                    vectors.append((new_id, record["collection"], model_id, np.frombuffer(blob, dtype=np.float32)))
            # A bulk load: PostgreSQL builds each pair's HNSW index once, below, not row by row.
            target.put_embeddings(conn, vectors, bulk=True)
        after = rows[-1]["id"]
        done += len(rows)
        if progress is not None:
            progress(done, total)
    _link_superseded(source, target)
    point_at_live_targets(source, target)
    _copy_import_links(source, target)
    target.restart_ids()
    indexes = target.build_vector_indexes()
    return {"memories": copied, "vector_indexes": indexes, "merged_duplicates": merged, "sessions": new_sessions, "resumed_after": start,
            "total": total, "source": source.location, "target": target.location}


def _resume_point(source: Store, target: Store) -> int:
    """The last memory id the target already holds, checked to be this source's: the target's last
    row must be the source's row of that id by rows.same_memory (its uid, which migrate copies; for
    a copy stopped before uids existed, whose two sides were given different provisional uids, its
    collection, created_at, content hash and text). An id and a content hash alone do not tell: two
    unrelated stores both begin at id 1, often with the same first lesson."""
    columns = ", ".join(_IDENTITY)
    with target.read() as conn:
        last = conn.execute(f"SELECT {columns} FROM memories ORDER BY id DESC LIMIT 1").fetchone()
    if last is None:
        return 0
    held = dict(zip(_IDENTITY, last))
    with source.read() as conn:
        row = conn.execute(f"SELECT {columns} FROM memories WHERE id = ?", (held["id"],)).fetchone()
    if row is None or not same_memory(held, dict(zip(_IDENTITY, row))):
        raise ConflictError(
            f"the target {target.location} already holds other memories (its memory {held['id']} is not this "
            "store's); migrate into an empty store (or continue an interrupted copy of this same store)", field="to",
        )
    return int(held["id"])


def _count_upto(source: Store, last_id: int) -> int:
    with source.read() as conn:
        return int(conn.execute("SELECT count(*) FROM memories WHERE id <= ?", (last_id,)).fetchone()[0])


def _copy_one(target: Store, conn: Any, record: dict[str, Any]) -> int | None:
    """The memory and its payload; None when the target refuses it (PostgreSQL keeps one live copy
    of a fact; the source had two)."""
    new_id = target.insert_row(conn, record, keep_id=True)
    if new_id is not None and record["payload"] is not None:
        target.insert_payload(conn, new_id, record["payload"], record["payload_summary"] or {})
    return new_id


def _link_superseded(source: Store, target: Store) -> None:
    with source.read() as conn:
        links = [(int(m), int(t)) for m, t in conn.execute(
            "SELECT id, superseded_by FROM memories WHERE superseded_by IS NOT NULL ORDER BY id")]
    with target.write() as conn:
        for memory_id, superseded_by in links:
            conn.execute("UPDATE memories SET superseded_by = ? WHERE id = ? AND superseded_by IS NULL "
                         "AND EXISTS (SELECT 1 FROM memories t WHERE t.id = ?)",
                         (superseded_by, memory_id, superseded_by))


def _copy_import_links(source: Store, target: Store) -> None:
    """The links a stopped import left waiting; a row the target holds already (a copy run again) is kept."""
    with source.read() as conn:
        links = [(int(m), s, str(a)) for m, s, a in conn.execute(
            "SELECT memory_id, superseded_by, absorbed FROM import_links ORDER BY memory_id")]
    if not links:
        return
    with target.write() as conn:
        conn.executemany("INSERT INTO import_links (memory_id, superseded_by, absorbed) VALUES (?, ?, ?) "
                         "ON CONFLICT (memory_id) DO NOTHING", links)
