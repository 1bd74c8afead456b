"""Store statistics (for `robotmem stats` and the MCP stats resource)."""

from __future__ import annotations

from typing import Any

import apsw

from .connection import scalar

__all__ = ["store_stats"]


def store_stats(conn: apsw.Connection, collection: str | None) -> dict[str, Any]:
    where, params = ("WHERE collection = ?", [collection]) if collection is not None else ("", [])
    by_collection: dict[str, dict[str, Any]] = {}
    # Counts kept by triggers (robotmem.store.counts): a few rows, whatever the store's size.
    for coll, kind, status, count in conn.execute(
        f"SELECT collection, type, status, n FROM memory_counts {where} ORDER BY 1, 2, 3", params
    ):
        if not count:
            continue
        entry = by_collection.setdefault(coll, {"facts": 0, "perceptions": 0, "by_status": {}})
        if status in ("active", "archived"):
            entry["facts" if kind == "fact" else "perceptions"] += count
        entry["by_status"][status] = entry["by_status"].get(status, 0) + count
    for coll, open_count, ended_count in conn.execute(
        f"SELECT collection, sum(ended_at IS NULL), sum(ended_at IS NOT NULL) FROM sessions {where} GROUP BY 1",
        params,
    ):
        entry = by_collection.setdefault(coll, {"facts": 0, "perceptions": 0, "by_status": {}})
        entry["sessions"] = {"open": open_count, "ended": ended_count}
    models: dict[str, int] = {}
    for model, count in conn.execute(
        f"SELECT model_id, n FROM embedding_counts {where} ORDER BY collection, model_id", params
    ):
        if count:
            models[model] = models.get(model, 0) + count
    payload_bytes = scalar(conn, f"SELECT coalesce(sum(bytes), 0) FROM payload_counts {where}", params)
    page_count = scalar(conn, "PRAGMA page_count")
    page_size = scalar(conn, "PRAGMA page_size")
    totals = {
        "facts": sum(e["facts"] for e in by_collection.values()),
        "perceptions": sum(e["perceptions"] for e in by_collection.values()),
        "sessions": sum(sum((e.get("sessions") or {}).values()) for e in by_collection.values()),
    }
    return {
        "memories": totals["facts"] + totals["perceptions"],
        **totals,
        "collections": by_collection,
        "embeddings": models,
        "payload_bytes": payload_bytes,
        "file_bytes": page_count * page_size,
        "schema_version": scalar(conn, "PRAGMA user_version"),
    }
