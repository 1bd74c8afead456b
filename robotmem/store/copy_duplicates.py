"""Second live copies of a fact met by ``robotmem migrate`` (robotmem.store.copy).

A collection holds one live fact per text + context (``learn`` reinforces a repeat, ``update``
refuses to make one). Stores written by versions whose ``update`` did not check may hold two
live copies. The copy checks each live fact against the target first (``second_live_copy``), the
same on any target (PostgreSQL's unique index would refuse the second; SQLite has none), and keeps
the second copy the way consolidation keeps a merged duplicate: ``status = 'superseded'``,
``superseded_by`` the live copy, which gains the row (and what it had absorbed) in ``absorbed``,
its evidence, and the wider first/last seen. Confidence is not re-scored (migrate copies
scores as stored). ``copy_store`` counts these rows as ``merged_duplicates``.
"""

from __future__ import annotations

import json
from typing import Any

from .backend import Store, dialect_of

__all__ = ["keep_as_merged", "point_at_live_targets", "second_live_copy"]


def second_live_copy(target: Store, conn: Any, record: dict[str, Any]) -> int | None:
    """The id of the live copy ``target`` already holds of ``record``, a live fact (same collection
    and content hash), or None: such a record is to be kept with ``keep_as_merged``, whatever the
    target's backend."""
    if record["type"] != "fact" or record["status"] not in ("active", "archived"):
        return None
    return target.find_duplicate(conn, record["collection"], record["content_hash"])


def keep_as_merged(target: Store, conn: Any, record: dict[str, Any], live: int | None = None) -> int:
    """Insert ``record``, a second live copy of a fact (of ``live``, found by ``second_live_copy``;
    None: refused by PostgreSQL's unique index, and looked up here), as merged into the live copy;
    returns its id (kept)."""
    if live is None:
        live = target.find_duplicate(conn, record["collection"], record["content_hash"])
    if live is None:  # pragma: no cover - the refusal said there is one, in this same transaction
        raise AssertionError(f"memory {record['id']} was refused but no live copy of it exists")
    new_id = target.insert_row(conn, {**record, "status": "superseded"}, keep_id=True)
    if new_id is None:  # pragma: no cover - a superseded row is never refused
        raise AssertionError(f"memory {record['id']} was refused as superseded")
    absorbed_sql = "absorbed::text" if dialect_of(conn) == "postgresql" else "absorbed"
    evidence, first_seen, last_seen, absorbed = conn.execute(
        f"SELECT evidence_count, first_seen, last_seen, {absorbed_sql} FROM memories WHERE id = ?", (live,),
    ).fetchone()
    absorbed = [*json.loads(absorbed), new_id, *record["absorbed"]]
    cast = "?::jsonb" if dialect_of(conn) == "postgresql" else "?"
    conn.execute(
        f"UPDATE memories SET evidence_count = ?, first_seen = ?, last_seen = ?, absorbed = {cast} WHERE id = ?",
        (int(evidence) + int(record["evidence_count"]), min(first_seen, record["first_seen"]),
         max(last_seen, record["last_seen"]), json.dumps(absorbed), live),
    )
    conn.execute("UPDATE memories SET superseded_by = ? WHERE id = ?", (live, new_id))
    return new_id


def point_at_live_targets(source: Store, target: Store) -> None:
    """After the source's ``superseded_by`` links are set: a memory that pointed at a copy merged
    by ``keep_as_merged`` (live in the source, superseded in the target; this run's or an
    interrupted earlier one's) points at the live copy instead, as consolidation re-points what a
    merged memory had absorbed."""
    live = "type = 'fact' AND status IN ('active', 'archived')"
    with target.read() as conn:
        superseded = {int(r[0]) for r in conn.execute(
            "SELECT id FROM memories WHERE type = 'fact' AND status = 'superseded'")}
    if not superseded:
        return
    with source.read() as conn:
        merged = sorted(int(r[0]) for r in conn.execute(f"SELECT id FROM memories WHERE {live}")
                        if int(r[0]) in superseded)
    with target.write() as conn:
        for memory_id in merged:
            conn.execute("UPDATE memories SET superseded_by = (SELECT t.superseded_by FROM memories t WHERE t.id = ?) "
                         "WHERE superseded_by = ?", (memory_id, memory_id))
