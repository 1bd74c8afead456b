"""An episode's memories read narrow, for a page that draws them (robotmem.view).

``Memory.session_timeline`` reads every memory in full (content, the whole context, the
bookkeeping) and scores its confidence: for an episode of 20,000 records that was most of
the time its web page took to open, although the page draws only a thinned path, a few
curves and a page of the timeline. Here a page reads each memory's time, kind, status,
payload summary and the values at the context key paths it names; the content only of the
memories a timeline page shows, read from the page's place in the episode's time order by the
index on (session_id, occurred_at, id), the others only counted there.

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

__all__ = ["KeyPath", "LAST_PLACE", "Place", "session_count", "session_lines", "session_outline"]

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


#: A place in a session's time order: (occurred_at, id). Paging by it reads the index on (session_id,
#: occurred_at, id) (migrations: SQLite 23, PostgreSQL 12) from that place, not every record before it.
Place = tuple[float, int]
#: The id part of a place after every record of its instant (ids are SQL's 64-bit integers).
LAST_PLACE = 2**63 - 1

#: Records after a place, in time order (ties by id); row values on both stores.
_AFTER = " AND (m.occurred_at, m.id) > (?, ?)"


def session_lines(conn: Any, session_id: str, paths: Sequence[KeyPath], count: int, *, after: Place | None = None,
                  skip: int = 0, last: bool = False) -> list[dict[str, Any]]:
    """Up to ``count`` memories of the session in time order (``occurred_at``, then id), as
    session_outline gives them with their ``content`` too (a timeline page's lines): those after
    the place ``after``, or (none) from the first, past the first ``skip``; ``last``: the last
    ``count`` instead."""
    if skip:
        # the place of the last record skipped, from the index alone: PostgreSQL's OFFSET computed
        # every skipped row's columns (the payload summary, the context values)
        found = conn.execute("SELECT occurred_at, id FROM memories WHERE session_id = ? ORDER BY occurred_at, id "
                             "LIMIT 1 OFFSET ?", (session_id, skip - 1)).fetchone()
        if found is None:
            return []
        after = float(found[0]), int(found[1])
    where = _AFTER if after is not None else ""
    order = "DESC" if last else ""
    rows = conn.execute(
        f"SELECT {_COLUMNS}, m.content{''.join(', ' + _value_sql(conn, path) for path in paths)} {_FROM} "
        f"WHERE m.session_id = ?{where} ORDER BY m.occurred_at {order}, m.id {order} LIMIT ?",
        (session_id, *(after or ()), count))
    records = [dict(_record(row[:6] + row[7:], paths), content=row[6]) for row in map(tuple, rows)]
    return records[::-1] if last else records


def session_count(conn: Any, session_id: str, through: Place | None = None) -> int:
    """How many memories the session holds (``through``: at or before that place in time order)."""
    where = " AND (occurred_at, id) <= (?, ?)" if through is not None else ""
    return int(conn.execute(f"SELECT count(*) FROM memories WHERE session_id = ?{where}",
                            (session_id, *(through or ()))).fetchone()[0])
