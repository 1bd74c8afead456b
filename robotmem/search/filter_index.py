"""Candidate sets for a context filter from the leaf index (robotmem.store.leaves).

A validated filter yields *alternatives*: leaf-index queries whose ids are each a
superset of the filter's matches (one per positive clause of a conjunction, a union
for ``$in`` and for ``$or`` when every branch has one). Recall takes the smallest
alternative, found by a bounded count, and checks the whole filter on those rows, so
answers stay exact while a selective filter reads an index range instead of the
JSON of every memory. ``$exists``, negations (``$ne``, ``$nin``) and paths the index
cannot spell have no alternative; they keep the full scan. (``$exists`` would need every
object below its path, and an object whose keys all hold brackets has no leaf row.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import apsw

from ..store.connection import scalar
from ..store.leaves import EPOCHS, leaf_path
from .count_cache import CountCache, StoreStamp, store_stamp

__all__ = ["LeafSet", "alternatives", "exact_clause", "smallest"]

_DIGIT = re.compile(r"[0-9]")
_NUMBER_KINDS = "kind IN ('integer', 'real')"
_RANGE_SQL = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


@dataclass(frozen=True)
class LeafSet:
    """A union of leaf-index lookups; each part is a WHERE clause after ``collection = ?``."""

    parts: tuple[tuple[str, tuple[Any, ...]], ...]
    ranged: bool = False  # a range scan: usually wider than an equality, so tried later

    def query(self, collection: str, epochs: str) -> tuple[str, list[Any]]:
        """The ids' SQL and parameters; ``epochs``: robotmem.store.leaves.epoch_list of the store."""
        selects, params = [], []
        for where, part_params in self.parts:
            selects.append(f"SELECT memory_id FROM context_leaves WHERE collection = ? AND {EPOCHS} AND {where}")
            params += [collection, epochs, *part_params]
        return " UNION ".join(selects), params


def alternatives(spec: dict[str, Any]) -> tuple[LeafSet, ...]:
    """Supersets of the matches of a validated filter, most specific first (equality before ranges)."""
    found: list[LeafSet] = []
    for key, value in spec.items():
        if key == "$and":
            for item in value:
                found += alternatives(item)
        elif key == "$or":
            branches = [alternatives(item) for item in value]
            if all(branches):
                found.append(LeafSet(tuple(p for branch in branches for p in branch[0].parts),
                                     ranged=any(branch[0].ranged for branch in branches)))
        else:
            found += _clause(key, value)
    return tuple(sorted(found, key=lambda s: s.ranged))


def _clause(dot_path: str, value: Any) -> list[LeafSet]:
    path = leaf_path(dot_path)
    if path is None:
        return []
    ops = value if isinstance(value, dict) else {"$eq": value}
    out: list[LeafSet] = []
    for op, arg in ops.items():
        if op == "$eq":
            out.append(LeafSet((_equals(path, arg),)))
        elif op == "$in":
            out.append(LeafSet(tuple(_equals(path, item) for item in arg)))
        elif op in _RANGE_SQL:
            out.append(LeafSet((_range(path, op, arg),), ranged=True))
    return out


def exact_clause(dot_path: str, value: Any) -> list[LeafSet] | None:
    """Leaf sets whose intersection is *exactly* the matches of the clause ``{dot_path: value}``,
    or None when the index cannot say (a negation, ``$exists``, a path it cannot spell).

    Exact because a leaf row holds the typed scalar at the path and nothing else: equality
    and ranges compare it as the filter grammar does (typed, numbers with numbers).
    """
    ops = value if isinstance(value, dict) else {"$eq": value}
    if leaf_path(dot_path) is None or not all(_exact_operand(op, arg) for op, arg in ops.items()):
        return None
    return _clause(dot_path, value)


def _exact_operand(op: str, arg: Any) -> bool:
    # ``value`` is declared ANY in an ordinary table, which is NUMERIC affinity: a text leaf that
    # reads as a number ("05", "5.0") is stored as that number. Text holding no digit is stored
    # as itself; a numeral text can share a leaf value with others, and a text range misses it.
    if op in _RANGE_SQL:
        return not isinstance(arg, str)
    if op not in ("$eq", "$in"):
        return False
    return all(not isinstance(v, str) or not _DIGIT.search(v) for v in (arg if op == "$in" else [arg]))


def _equals(path: str, value: Any) -> tuple[str, tuple[Any, ...]]:
    if value is None:
        return "path = ? AND value = 0 AND kind = 'null'", (path,)
    if isinstance(value, bool):
        return f"path = ? AND value = ? AND kind = '{'true' if value else 'false'}'", (path, int(value))
    if isinstance(value, (int, float)):
        return f"path = ? AND value = ? AND {_NUMBER_KINDS}", (path, value)
    return "path = ? AND value = ? AND kind = 'text'", (path, value)


def _range(path: str, op: str, value: Any) -> tuple[str, tuple[Any, ...]]:
    if isinstance(value, str):
        # A numeral text leaf is stored as its number (see _exact_operand), which no text bound can
        # place: such leaves (value < '') are all kept. ``+value`` drops the column's affinity, which
        # would turn a numeral bound into a number and compare text with it numerically.
        return (f"path = ? AND kind = 'text' AND (value < '' OR +value {_RANGE_SQL[op]} ?)", (path, value))
    # ... and the upper bound keeps a numeric range off the text values.
    return f"path = ? AND value {_RANGE_SQL[op]} ? AND value < '' AND {_NUMBER_KINDS}", (path, value)


#: (count, the cap it was counted up to) by leaf-set query
_LEAF_COUNTS: CountCache[tuple[int, int]] = CountCache()


def smallest(conn: apsw.Connection, sets: tuple[LeafSet, ...], collection: str, cap: int,
             epochs: str) -> tuple[LeafSet, int] | None:
    """The alternative with the fewest ids (counted up to ``cap``), or None when there is none;
    ``epochs``: robotmem.store.leaves.epoch_list of the store, which the caller queries with too.

    The counts only choose the plan (both plans are exact), so they are reused while the store
    is nearly the same (robotmem.search.count_cache): a control loop's filter is counted once.
    """
    stamp = store_stamp(conn)
    best: tuple[LeafSet, int] | None = None
    for leaf_set in sets:
        limit = cap if best is None else best[1]
        count = _count(conn, stamp, leaf_set.query(collection, epochs), limit)
        if best is None or count < best[1]:
            best = (leaf_set, count)
    return best


def _count(conn: apsw.Connection, stamp: StoreStamp, query: tuple[str, list[Any]], limit: int) -> int:
    """How many ids ``query`` selects, up to ``limit`` (a count that reached its cap means "at least")."""
    q, p = query
    key = ("leaf set", q, tuple(p))
    cached = _LEAF_COUNTS.get(stamp, key)
    if cached is not None:
        count, capped_at = cached
        if count < capped_at or capped_at >= limit:
            return min(count, limit)
    count = int(scalar(conn, f"SELECT count(*) FROM (SELECT 1 FROM ({q}) LIMIT ?)", [*p, limit]))
    _LEAF_COUNTS.put(stamp, key, (count, limit))
    return count
