"""An inverted index of context leaves: (collection, path, value) -> memory.

Triggers keep ``context_leaves`` in step with ``memories.context`` for every write
path (raw SQL repairs included), so a selective filter finds its memories by index
range instead of evaluating JSON over the whole collection. The table is an
accelerator only: recall still checks the full filter on the rows it yields, so a
leaf that is missing or extra can cost time but never change an answer.

Rows: every scalar leaf, every array and every empty object of the context, keyed by
SQLite's own ``json_tree`` ``fullkey`` (e.g. ``$.task.success``, ``$.params."grip_force"``).
Elements of arrays are left out: a dot path cannot address them. ``value`` is the
JSON atom (``true``/``false`` as 1/0) and 0 for null, arrays and objects, ``kind`` the
JSON type, so equality stays typed.
"""

from __future__ import annotations

import re

__all__ = ["DEFER_LEAVES", "INSERT_LEAVES_RANGE", "LEAVES_SCHEMA", "leaf_path", "leaves_at_path_sql"]

_LEAF_ROWS = """
    SELECT {prefix}.collection AS collection, t.fullkey AS path,
           CASE WHEN t.type IN ('object', 'array', 'null') THEN 0 ELSE t.atom END AS value,
           t.type AS kind, {prefix}.id AS memory_id
    FROM {source}json_tree({prefix}.context) AS t
    WHERE t.fullkey <> '$' AND t.fullkey NOT LIKE '%[%'
      AND (t.type <> 'object' OR NOT EXISTS (SELECT 1 FROM json_each(t.value)))
"""


def _rows(prefix: str, source: str = "") -> str:
    return _LEAF_ROWS.format(prefix=prefix, source=source)


# Deleting by the old context's own leaves hits the primary key: no second index on memory_id.
_DELETE_OLD = (
    "DELETE FROM context_leaves WHERE (collection, path, value, memory_id) IN ("
    f"SELECT collection, path, value, memory_id FROM ({_rows('old')}));"
)

LEAVES_SCHEMA = f"""
CREATE TABLE context_leaves (
    collection TEXT NOT NULL,
    path       TEXT NOT NULL,     -- json_tree fullkey
    value      ANY NOT NULL,
    kind       TEXT NOT NULL,     -- json_type of the leaf
    memory_id  INTEGER NOT NULL,
    PRIMARY KEY (collection, path, value, memory_id)
) WITHOUT ROWID;

CREATE TRIGGER memories_ai_leaves AFTER INSERT ON memories BEGIN
    INSERT INTO context_leaves (collection, path, value, kind, memory_id) {_rows("new")};
END;
CREATE TRIGGER memories_ad_leaves AFTER DELETE ON memories BEGIN
    {_DELETE_OLD}
END;
CREATE TRIGGER memories_au_leaves AFTER UPDATE OF context, collection ON memories
    WHEN old.context IS NOT new.context OR old.collection IS NOT new.collection BEGIN
    {_DELETE_OLD}
    INSERT INTO context_leaves (collection, path, value, kind, memory_id) {_rows("new")};
END;

INSERT INTO context_leaves (collection, path, value, kind, memory_id) {_rows("m", "memories AS m, ")};
"""

_INSERT_NEW = "INSERT INTO context_leaves (collection, path, value, kind, memory_id) {rows};"

# Migration 9: bulk inserts write a batch's leaves in one statement (robotmem.store.deferred).
# A row in ``leaves_deferred``, present only inside the bulk writer's own transaction, turns
# the per-row trigger off; every other insert (raw SQL included) still goes through it.
# Safe to run again (tests rewind user_version).
DEFER_LEAVES = f"""
CREATE TABLE IF NOT EXISTS leaves_deferred (id INTEGER PRIMARY KEY);
DROP TRIGGER IF EXISTS memories_ai_leaves;
CREATE TRIGGER memories_ai_leaves AFTER INSERT ON memories WHEN NOT EXISTS (SELECT 1 FROM leaves_deferred) BEGIN
    {_INSERT_NEW.format(rows=_rows("new"))}
END;
"""

#: The leaves of the memories with ids in [?, ?], in key order (robotmem.store.deferred).
INSERT_LEAVES_RANGE = _INSERT_NEW.format(
    rows=f"SELECT * FROM ({_rows('m', 'memories AS m, ')} AND m.id BETWEEN ? AND ?) ORDER BY collection, path, value, memory_id")


def leaves_at_path_sql(where: str) -> str:
    """(memory_id, kind, value) of the leaves at path ``?`` of the memories ``m`` that ``where``
    selects, exactly as the triggers index them, from the JSON: by memory id without a scan of
    the path's leaves (the primary key starts with the value)."""
    return f"SELECT memory_id, kind, value FROM ({_rows('m', 'memories AS m, ')} AND {where}) WHERE path = ?"


# SQLite writes a key bare when it is a letter followed by letters and digits, else quoted.
_BARE = re.compile(r"[A-Za-z][A-Za-z0-9]*")
# Keys whose quoted form is their own text: printable ASCII without quote, backslash or brackets.
_QUOTABLE = re.compile(r"[ !#-Z^-~]+")


def leaf_path(dot_path: str) -> str | None:
    """The ``fullkey`` json_tree gives the leaf at ``dot_path``, or None when the index cannot answer for it."""
    out = ["$"]
    for segment in dot_path.split("."):
        if _BARE.fullmatch(segment):
            out.append("." + segment)
        elif _QUOTABLE.fullmatch(segment) and "\\" not in segment:
            out.append('."' + segment + '"')
        else:
            return None
    return "".join(out)
