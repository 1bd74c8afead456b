"""An episode's memories read narrow, for a page that draws them (robotmem.view).

``Memory.session_timeline`` reads every memory in full (content, the whole context, the
bookkeeping) and scores its confidence: for an episode of 20,000 records that was most of
the time its web page took to open, although the page draws only a thinned path, a few
curves and a page of the timeline. Here a page reads each memory's time, kind, status,
payload summary and the context sections it names; the content only of the memories a
timeline page shows; and for a later timeline page, only the ids and times of the rest.

The statements run on a connection of ``Store.read()``; a context section is spelt per
dialect (SQLite's ``->`` gives JSON text, PostgreSQL's gives jsonb).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..context import load_stored_json
from ..payload import summary_from_json
from .backend import dialect_of

__all__ = ["memory_outlines", "session_outline", "session_times"]

_NAME = re.compile(r"^[a-z_]+$")
_SECTION_SQL = {"sqlite": "m.context -> '{name}'", "postgresql": "(m.context -> '{name}')::text"}
_COLUMNS = "m.id, m.type, m.perception_type, m.status, m.occurred_at, p.summary"
_FROM = "FROM memories m LEFT JOIN payloads p ON p.memory_id = m.id"


def _names(names: Sequence[str]) -> Sequence[str]:
    # names go into the SQL text (a bound name is of no one type to PostgreSQL's ->): words only
    bad = [n for n in names if not _NAME.match(n)]
    if bad:
        raise ValueError(f"context keys here are lower-case words, not {bad!r}")
    return names


def _section_columns(conn: Any, sections: Sequence[str]) -> str:
    spelling = _SECTION_SQL[dialect_of(conn)]
    return "".join(", " + spelling.format(name=name) for name in _names(sections))


def _holding(paths: Sequence[Sequence[str]]) -> str:
    """SQL true for a context that has a value at one of ``paths`` (the same spelling on both stores)."""
    if not paths:
        return ""
    tests = [" -> ".join(["m.context", *(f"'{key}'" for key in _names(path))]) + " IS NOT NULL" for path in paths]
    return " AND (" + " OR ".join(tests) + ")"


def session_outline(conn: Any, session_id: str, sections: Sequence[str],
                    holding: Sequence[Sequence[str]] = ()) -> list[dict[str, Any]]:
    """The memories of the session, in time order (``occurred_at``, then id), as narrow records:
    ``id``, ``type``, ``perception_type``, ``status``, ``occurred_at``, ``payload`` (its summary;
    absent without a payload) and ``context`` holding only those of ``sections`` it has.
    ``holding``: only the memories whose context has a value at one of these key paths."""
    rows = conn.execute(
        f"SELECT {_COLUMNS}{_section_columns(conn, sections)} {_FROM} WHERE m.session_id = ?{_holding(holding)} "
        "ORDER BY m.occurred_at, m.id", (session_id,))
    return [_record(row, sections) for row in rows]


def _record(row: Sequence[Any], sections: Sequence[str]) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": row[0], "type": row[1], "perception_type": row[2], "status": row[3], "occurred_at": row[4],
        "context": {name: load_stored_json(text) for name, text in zip(sections, row[6:]) if text is not None},
    }
    if row[5] is not None:
        record["payload"] = summary_from_json(row[5])
    return record


def session_times(conn: Any, session_id: str) -> list[tuple[int, float]]:
    """``(id, occurred_at)`` of every memory of the session, in time order as session_outline gives them."""
    return [(mid, at) for mid, at in conn.execute(
        "SELECT id, occurred_at FROM memories WHERE session_id = ? ORDER BY occurred_at, id", (session_id,))]


def memory_outlines(conn: Any, memory_ids: Sequence[int], sections: Sequence[str]) -> dict[int, dict[str, Any]]:
    """``{id: narrow record}`` as session_outline gives them, with ``content``, of the memories
    named (a page of a timeline: a few hundred at most, one placeholder each, well within either
    database's limit); unknown ids are absent."""
    if not memory_ids:
        return {}
    marks = ", ".join("?" * len(memory_ids))
    rows = conn.execute(f"SELECT {_COLUMNS}, m.content{_section_columns(conn, sections)} {_FROM} "
                        f"WHERE m.id IN ({marks})", tuple(memory_ids))
    return {row[0]: dict(_record(row[:6] + row[7:], sections), content=row[6]) for row in map(tuple, rows)}
