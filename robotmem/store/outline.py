"""An episode's memories read narrow, for a page that draws them (robotmem.view).

``Memory.session_timeline`` reads every memory in full (content, the whole context, the
bookkeeping) and scores its confidence: for an episode of 20,000 records that was most of
the time its web page took to open, although the page draws only a thinned path, a few
curves and a page of the timeline. Here the page reads each memory's time, kind, status,
payload summary and the context sections it names; the content only of the memories a
timeline page shows.

The statements run on a connection of ``Store.read()``; the context sections are spelt
per dialect (SQLite's ``->`` gives JSON text, PostgreSQL's gives jsonb).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..context import load_stored_json
from ..payload import summary_from_json
from .backend import dialect_of

__all__ = ["memory_contents", "session_outline"]

_SECTION = re.compile(r"^[a-z_]+$")
_SECTION_SQL = {"sqlite": "m.context -> '{name}'", "postgresql": "(m.context -> '{name}')::text"}


def _section_columns(conn: Any, sections: Sequence[str]) -> str:
    # names go into the SQL text (a bound name is an ambiguous type to PostgreSQL's ->): letters only
    bad = [s for s in sections if not _SECTION.match(s)]
    if bad:
        raise ValueError(f"context section names are lower-case words, not {bad!r}")
    spelling = _SECTION_SQL[dialect_of(conn)]
    return "".join(", " + spelling.format(name=name) for name in sections)


def session_outline(conn: Any, session_id: str, sections: Sequence[str]) -> list[dict[str, Any]]:
    """Every memory of the session, in time order (``occurred_at``, then id), as a narrow record:
    ``id``, ``type``, ``perception_type``, ``status``, ``occurred_at``, ``payload`` (its summary;
    absent without a payload) and ``context`` holding only those of ``sections`` it has."""
    rows = conn.execute(
        "SELECT m.id, m.type, m.perception_type, m.status, m.occurred_at, p.summary"
        f"{_section_columns(conn, sections)} FROM memories m LEFT JOIN payloads p ON p.memory_id = m.id "
        "WHERE m.session_id = ? ORDER BY m.occurred_at, m.id", (session_id,))
    return [_record(row, sections) for row in rows]


def _record(row: Sequence[Any], sections: Sequence[str]) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": row[0], "type": row[1], "perception_type": row[2], "status": row[3], "occurred_at": row[4],
        "context": {name: load_stored_json(text) for name, text in zip(sections, row[6:]) if text is not None},
    }
    if row[5] is not None:
        record["payload"] = summary_from_json(row[5])
    return record


def memory_contents(conn: Any, memory_ids: Sequence[int]) -> dict[int, str]:
    """``{id: content}`` of the memories named (a page of a timeline: a few hundred at most, one
    placeholder each, well within either database's limit); unknown ids are absent."""
    if not memory_ids:
        return {}
    marks = ", ".join("?" * len(memory_ids))
    return {mid: content for mid, content in conn.execute(
        f"SELECT id, content FROM memories WHERE id IN ({marks})", tuple(memory_ids))}
