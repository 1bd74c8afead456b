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

Keys start with (collection, path, epoch), ``epoch`` = memory id >> ``EPOCH_BITS``: a new
memory's leaves land in its epoch's small range of each path, so a batch dirties a few
hundred index pages instead of one per random-valued leaf (at 1,000,000 memories, 3,300
pages per 1,000 records, most of a bulk insert's WAL). Readers seek each epoch
(``EPOCHS``: one seek per 16,384 memory ids) or walk a path's epochs in key order.
"""

from __future__ import annotations

import json
import re

import apsw

from .connection import scalar

__all__ = ["DEFER_LEAVES", "EPOCHS", "EPOCH_BITS", "EPOCH_LEAVES", "INSERT_LEAVES_RANGE", "LEAVES_SCHEMA",
           "MARKER_ABSENT", "UNMARKED_INSERT_LEAVES", "epoch_list", "epochs_through", "leaf_path", "leaves_at_path_sql"]

# An array element's fullkey holds '[' (so does a quoted key with one, which a dot path cannot
# address either); an empty object's value is the text '{}' (json_tree gives containers as
# minified text, also from JSONB). instr and the comparison, against LIKE '%[%' and a json_each
# of the value: the same rows, 8.0 against 9.2 ms for 1,000 bench contexts.
_LEAF_ROWS = """
    SELECT {prefix}.collection AS collection, t.fullkey AS path,
           CASE WHEN t.type IN ('object', 'array', 'null') THEN 0 ELSE t.atom END AS value,
           t.type AS kind, {prefix}.id AS memory_id{epoch}
    FROM {source}json_tree({prefix}.context) AS t
    WHERE t.fullkey <> '$' AND instr(t.fullkey, '[') = 0
      AND (t.type <> 'object' OR t.value = '{{}}')
"""


#: Memory ids per epoch of the leaf index's keys (migration 14).
EPOCH_BITS = 14


def _rows(prefix: str, source: str = "", *, epoch: bool = True) -> str:
    """The leaf rows of ``{prefix}.context``; ``epoch``: with the epoch column (migrations 6 and 9 predate it)."""
    column = f", {prefix}.id >> {EPOCH_BITS} AS epoch" if epoch else ""
    return _LEAF_ROWS.format(prefix=prefix, source=source, epoch=column)


def _delete_old(*, epoch: bool = True) -> str:
    """Deleting by the old context's own leaves hits the primary key: no second index on memory_id."""
    key = "collection, path, epoch, value, memory_id" if epoch else "collection, path, value, memory_id"
    return f"DELETE FROM context_leaves WHERE ({key}) IN (SELECT {key} FROM ({_rows('old', epoch=epoch)}));"


def _insert(rows: str, *, epoch: bool = True) -> str:
    columns = "collection, path, value, kind, memory_id" + (", epoch" if epoch else "")
    return f"INSERT INTO context_leaves ({columns}) {rows};"


def _table(name: str, *, epoch: bool) -> str:
    extra, key = ("    epoch      INTEGER NOT NULL,  -- memory_id >> EPOCH_BITS\n", "collection, path, epoch, value, memory_id") \
        if epoch else ("", "collection, path, value, memory_id")
    return f"""CREATE TABLE {name} (
    collection TEXT NOT NULL,
    path       TEXT NOT NULL,     -- json_tree fullkey
    value      ANY NOT NULL,
    kind       TEXT NOT NULL,     -- json_type of the leaf
    memory_id  INTEGER NOT NULL,
{extra}    PRIMARY KEY ({key})
) WITHOUT ROWID;"""


def _insert_trigger(*, epoch: bool, when: str = "") -> str:
    return f"""CREATE TRIGGER memories_ai_leaves AFTER INSERT ON memories{when} BEGIN
    {_insert(_rows("new", epoch=epoch), epoch=epoch)}
END;"""


def _triggers(*, epoch: bool, insert_when: str = "") -> str:
    """The triggers that keep the leaves in step with every insert, delete and context update."""
    return f"""{_insert_trigger(epoch=epoch, when=insert_when)}
CREATE TRIGGER memories_ad_leaves AFTER DELETE ON memories BEGIN
    {_delete_old(epoch=epoch)}
END;
CREATE TRIGGER memories_au_leaves AFTER UPDATE OF context, collection ON memories
    WHEN old.context IS NOT new.context OR old.collection IS NOT new.collection BEGIN
    {_delete_old(epoch=epoch)}
    {_insert(_rows("new", epoch=epoch), epoch=epoch)}
END;"""


#: True outside the bulk writer's old marker row (migrations 9-12 and 14; migration 17 dropped it).
MARKER_ABSENT = "NOT EXISTS (SELECT 1 FROM leaves_deferred)"
_UNLESS_DEFERRED = f" WHEN {MARKER_ABSENT}"

# Migration 6 (shipped; the key without the epoch, which migration 14 adds).
LEAVES_SCHEMA = f"""
{_table("context_leaves", epoch=False)}

{_triggers(epoch=False)}

{_insert(_rows("m", "memories AS m, ", epoch=False), epoch=False)}
"""

# Migration 9: bulk inserts write a batch's leaves in one statement (robotmem.store.deferred).
# A row in ``leaves_deferred``, present only inside the bulk writer's own transaction, turns
# the per-row trigger off; every other insert (raw SQL included) still goes through it.
# Safe to run again (tests rewind user_version).
DEFER_LEAVES = f"""
CREATE TABLE IF NOT EXISTS leaves_deferred (id INTEGER PRIMARY KEY);
DROP TRIGGER IF EXISTS memories_ai_leaves;
{_insert_trigger(epoch=False, when=_UNLESS_DEFERRED)}
"""

# Migration 14: the epoch joins the key (see the module docstring); the table is rewritten in
# key order and the three triggers made anew for the new key.
EPOCH_LEAVES = f"""
{_table("context_leaves_by_epoch", epoch=True)}
INSERT INTO context_leaves_by_epoch (collection, path, value, kind, memory_id, epoch)
    SELECT collection, path, value, kind, memory_id, memory_id >> {EPOCH_BITS} FROM context_leaves
    ORDER BY collection, path, memory_id >> {EPOCH_BITS}, value, memory_id;
DROP TRIGGER IF EXISTS memories_ai_leaves;
DROP TRIGGER IF EXISTS memories_ad_leaves;
DROP TRIGGER IF EXISTS memories_au_leaves;
DROP TABLE context_leaves;
ALTER TABLE context_leaves_by_epoch RENAME TO context_leaves;

{_triggers(epoch=True, insert_when=_UNLESS_DEFERRED)}
"""

# Migration 17: the insert trigger of migration 14 without migration 9's look for a marker row
# (robotmem.store.deferred). Safe to run again.
UNMARKED_INSERT_LEAVES = f"""
DROP TRIGGER IF EXISTS memories_ai_leaves;
{_insert_trigger(epoch=True)}
"""

#: ``AND``-able, with ``epoch_list`` as its parameter: the leaf rows of every epoch the store's
#: memory ids reach, which SQLite seeks one by one (with the rest of the key after each) instead of
#: walking a path's every row. A parameter, not a recursive CTE: a filter's ``$in`` of 500 values
#: is a UNION of 500 lookups, and 500 CTEs nest too deep for SQLite.
EPOCHS = "epoch IN (SELECT value FROM json_each(?))"


def epoch_list(conn: apsw.Connection) -> str:
    """``EPOCHS``' parameter: a JSON array of every epoch up to the newest memory id's."""
    return epochs_through(int(scalar(conn, "SELECT coalesce(max(id), 0) FROM memories")))


def epochs_through(newest_id: int) -> str:
    """``epoch_list`` for a caller that has read the newest memory id already."""
    return json.dumps(list(range((newest_id >> EPOCH_BITS) + 1)))

#: The leaves of the memories with ids in [?, ?], in key order (robotmem.store.deferred).
INSERT_LEAVES_RANGE = _insert(
    f"SELECT * FROM ({_rows('m', 'memories AS m, ')} AND m.id BETWEEN ? AND ?) "
    "ORDER BY collection, path, epoch, value, memory_id")


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
