"""The memory row as read back: its columns, the query that loads it, and its record form."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from ..context import lift_sections, load_stored_json
from ..payload import summary_from_json
from .decay import effective_confidence

__all__ = ["DUPLICATE_FACT_SQL", "HIT_COLUMNS", "MEMORY_COLUMNS", "OLD_RULE_COLUMNS", "hits_sql", "new_uid",
           "row_to_record", "same_memory"]

#: The oldest live fact of a collection with this content hash (learn's deduplication; both stores
#: index exactly these rows: ``type = 'fact'`` matches their partial indexes).
DUPLICATE_FACT_SQL = (
    "SELECT id FROM memories WHERE collection = ? AND content_hash = ? AND type = 'fact' "
    "AND status IN ('active', 'archived') ORDER BY id LIMIT 1"
)


def new_uid() -> str:
    """A memory's identity across stores (export, import, migrate): 32 hex digits, the milliseconds
    since the epoch (12) then 80 random bits (20), as UUIDv7 orders them. Leading with the time, a
    new memory's uid goes to the end of the unique index, as its id does, instead of a random page
    of it (a random content hash index dirtied 1,439 pages per 1,000 inserts at 1M memories,
    migration 13). Rows older than the column got a provisional uid (migration 19): see
    PROVISIONAL_PREFIX."""
    return f"{time.time_ns() // 1_000_000:012x}{os.urandom(10).hex()}"


#: The time part of a uid robotmem invented for a memory that had none (a row older than the column,
#: SQLite migration 19 and PostgreSQL migration 4; a line of an export written before uids): a time
#: of 0 ms, which new_uid never writes. Import takes such a row for the record of another file that
#: is the same memory by the old rule (collection, content hash, created_at, content), and gives it
#: that record's uid (robotmem.transfer).
PROVISIONAL_PREFIX = "000000000000"


def is_provisional(uid: str | None) -> bool:
    """Whether ``uid`` is one robotmem invented (PROVISIONAL_PREFIX), not a memory's own."""
    return uid is not None and uid.startswith(PROVISIONAL_PREFIX)


#: What identifies a memory whose uid is provisional (the old rule, from before uids): its
#: collection, created_at (seconds as a float, which two stores rarely share), content hash and text.
OLD_RULE_COLUMNS = ("collection", "created_at", "content_hash", "content")


def same_memory(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two stores' rows (each with ``uid`` and OLD_RULE_COLUMNS) are one memory: the same
    uid, or when either uid is provisional (invented separately on each side, for rows older than
    uids, so they differ for the same memory) the same values of OLD_RULE_COLUMNS. Two real uids
    that differ are two memories, however alike the rows are."""
    if a["uid"] == b["uid"]:
        return True
    if not (is_provisional(a["uid"]) or is_provisional(b["uid"])):
        return False
    return all(a[column] == b[column] for column in OLD_RULE_COLUMNS)


#: Every column of a memory, as export, import and migrate copy it.
MEMORY_COLUMNS = (
    "id", "collection", "session_id", "type", "perception_type", "content", "search_text", "context",
    "content_hash", "protected", "confidence", "reinforced_at", "evidence_count", "first_seen", "last_seen",
    "created_at", "occurred_at", "updated_at", "status", "superseded_by", "absorbed", "forgotten_at",
    "forget_reason", "access_count", "last_accessed", "embed", "uid",
)
#: Columns an insert writes (``superseded_by`` is set afterwards, when every id exists).
INSERTED_COLUMNS = tuple(c for c in MEMORY_COLUMNS if c != "superseded_by")

HIT_COLUMNS = (
    "id", "collection", "session_id", "type", "perception_type", "content", "context", "confidence",
    "reinforced_at", "protected", "created_at", "occurred_at", "updated_at", "evidence_count", "status",
    "superseded_by", "absorbed", "first_seen", "last_seen", "forgotten_at", "forget_reason", "access_count",
    "payload_summary",
)

# The SQL spelling of each column of HIT_COLUMNS, in the same order.
_SELECTED = tuple(
    {"context": "json(m.context)", "payload_summary": "p.summary"}.get(column, f"m.{column}")
    for column in HIT_COLUMNS
)


def hits_sql(memory_ids_json: str) -> tuple[str, list[Any]]:
    """Full rows (with the payload summary) of the memories whose ids are in the JSON array."""
    query = (f"SELECT {', '.join(_SELECTED)} FROM memories m LEFT JOIN payloads p ON p.memory_id = m.id "
             "WHERE m.id IN (SELECT value FROM json_each(?))")
    return query, [memory_ids_json]


def row_to_record(row: tuple[Any, ...], now: float, half_life_s: float, *, full: bool = False) -> dict[str, Any]:
    """A row of :func:`hits_sql` as the record recall and get return (``full`` adds the bookkeeping)."""
    values = dict(zip(HIT_COLUMNS, row))
    context = load_stored_json(values["context"]) if values["context"] else {}
    confidence = effective_confidence(
        values["confidence"], values["reinforced_at"], values["protected"], now, half_life_s
    )
    record: dict[str, Any] = {
        "id": values["id"],
        "content": values["content"],
        "type": values["type"],
        "perception_type": values["perception_type"],
        "session_id": values["session_id"],
        "collection": values["collection"],
        "confidence": round(confidence, 6),
        "created_at": values["created_at"],
        "occurred_at": values["occurred_at"],
        "context": context,
        **lift_sections(context),
    }
    if values["payload_summary"] is not None:
        record["payload"] = summary_from_json(values["payload_summary"])
    if full:
        record.update(
            status=values["status"],
            superseded_by=values["superseded_by"],
            evidence_count=values["evidence_count"],
            absorbed=json.loads(values["absorbed"]),
            first_seen=values["first_seen"],
            last_seen=values["last_seen"],
            updated_at=values["updated_at"],
            stored_confidence=values["confidence"],
            reinforced_at=values["reinforced_at"],
            protected=bool(values["protected"]),
            access_count=values["access_count"],
        )
        if values["status"] == "forgotten":
            record.update(forgotten_at=values["forgotten_at"], forget_reason=values["forget_reason"])
    return record
