"""An episode's memories read narrow, for a page that draws them (robotmem.view).

``Memory.session_timeline`` reads every memory in full (content, the whole context, the
bookkeeping) and scores its confidence: for an episode of 20,000 records that was most of
the time its web page took to open, although the page draws only a thinned path, a few
curves and a page of the timeline. Here a page reads each memory's time, kind, status,
payload summary and the values at the context key paths it names; the content only of the
memories a timeline page shows; and for a later timeline page, only the ids and times of
the rest.

The statements run on a connection of ``Store.read()``; a key path is spelt per dialect
(SQLite's ``-> '$.a.b'`` gives JSON text, PostgreSQL's ``#>`` jsonb, read as text).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..context import load_stored_json
from ..payload import summary_from_json
from .backend import dialect_of

__all__ = ["KeyPath", "memory_outlines", "session_outline", "session_times"]

_NAME = re.compile(r"[a-z_]+")
#: The value at a key path of a memory's context, as JSON text (NULL where there is none).
_VALUE_SQL = {"sqlite": "m.context -> '$.{dotted}'", "postgresql": "(m.context #> '{{{commas}}}')::text"}
_COLUMNS = "m.id, m.type, m.perception_type, m.status, m.occurred_at, p.summary"
_FROM = "FROM memories m LEFT JOIN payloads p ON p.memory_id = m.id"

#: A key path into a context: ("source", "topic") is context["source"]["topic"].
KeyPath = Sequence[str]


def _value_sql(conn: Any, path: KeyPath) -> str:
    # the keys go into the SQL text (a bound key path is spelt differently by each store): words only
    bad = [key for key in path if not _NAME.fullmatch(key)]
    if not path or bad:
        raise ValueError(f"a context key path here is lower-case words, not {list(path)!r}")
    return _VALUE_SQL[dialect_of(conn)].format(dotted=".".join(path), commas=",".join(path))


def session_outline(conn: Any, session_id: str, paths: Sequence[KeyPath],
                    holding: Sequence[KeyPath] = ()) -> list[dict[str, Any]]:
    """The memories of the session, in time order (``occurred_at``, then id), as narrow records:
    ``id``, ``type``, ``perception_type``, ``status``, ``occurred_at``, ``payload`` (its summary;
    absent without a payload) and ``context`` holding only the values at ``paths`` it has (key
    paths that do not overlap: ``("episode", "t_ns")`` and ``("episode", "gaps")``, not
    ``("episode",)`` as well). ``holding``: only the memories with a value at one of these paths."""
    having = " OR ".join(f"{_value_sql(conn, path)} IS NOT NULL" for path in holding)
    rows = conn.execute(
        f"SELECT {_COLUMNS}{''.join(', ' + _value_sql(conn, path) for path in paths)} {_FROM} "
        f"WHERE m.session_id = ?{f' AND ({having})' if having else ''} ORDER BY m.occurred_at, m.id", (session_id,))
    return [_record(tuple(row), paths) for row in rows]


def _record(row: tuple[Any, ...], paths: Sequence[KeyPath]) -> dict[str, Any]:
    record: dict[str, Any] = {"id": row[0], "type": row[1], "perception_type": row[2], "status": row[3],
                              "occurred_at": row[4], "context": _context(paths, row[6:])}
    if row[5] is not None:
        record["payload"] = summary_from_json(row[5])
    return record


def _context(paths: Sequence[KeyPath], texts: Sequence[str | None]) -> dict[str, Any]:
    """The values read at ``paths``, nested as in the context they come from."""
    context: dict[str, Any] = {}
    for path, text in zip(paths, texts):
        if text is not None:
            holder = context
            for key in path[:-1]:
                holder = holder.setdefault(key, {})
            holder[path[-1]] = load_stored_json(text)
    return context


def session_times(conn: Any, session_id: str) -> list[tuple[int, float]]:
    """``(id, occurred_at)`` of every memory of the session, in time order as session_outline gives them."""
    return [(mid, at) for mid, at in conn.execute(
        "SELECT id, occurred_at FROM memories WHERE session_id = ? ORDER BY occurred_at, id", (session_id,))]


def memory_outlines(conn: Any, memory_ids: Sequence[int], paths: Sequence[KeyPath]) -> dict[int, dict[str, Any]]:
    """``{id: narrow record}`` as session_outline gives them, with ``content``, of the memories
    named (a page of a timeline: a few hundred at most, one placeholder each, well within either
    database's limit); unknown ids are absent."""
    if not memory_ids:
        return {}
    marks = ", ".join("?" * len(memory_ids))
    rows = conn.execute(f"SELECT {_COLUMNS}, m.content{''.join(', ' + _value_sql(conn, path) for path in paths)} "
                        f"{_FROM} WHERE m.id IN ({marks})", tuple(memory_ids))
    return {row[0]: dict(_record(row[:6] + row[7:], paths), content=row[6]) for row in map(tuple, rows)}
