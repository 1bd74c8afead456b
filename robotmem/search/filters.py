"""The context filter grammar: parsed once into a tree, compiled to SQL for each store.

Grammar (see docs/data-model.md)::

    filter    := { clause, ... }                 every clause must hold
    clause    := "dot.path": value               equality
               | "dot.path": { op: operand, ... }
               | "$and": [filter, ...] | "$or": [filter, ...]
    op        := $eq $ne $gt $gte $lt $lte $in $nin $exists

Semantics (the one description both compilers follow, checked against the plain-Python
reference in tests/robotmem/search/filter_reference.py): a dot path names object keys
only (never array positions). Equality is typed: ``true`` matches JSON true only (not
1), ``5`` matches 5 and 5.0, ``"5"`` matches the string only, ``null`` matches JSON
null only. Order operators compare numbers with numbers and strings with strings (by
code point); a field of another type (or a missing one) does not match. ``$ne`` and
``$nin`` match memories where the field is missing. ``$exists`` is true for any value,
JSON null included. The compiled SQL is exact and runs over the whole collection, so it
is never a post-filter.

A filter holds at most ``MAX_FILTER_COMPARISONS`` comparisons (an ``$in`` of k values
counts k) and nests at most ``MAX_FILTER_DEPTH`` levels: SQLite refuses expression trees
deeper than 1,000 and more than 32,766 parameters, and a filter past these limits is a
``validation_error`` here rather than a storage error there.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal, Union

from .. import validation
from ..errors import ValidationError, brief
from ..models import DOT_PATH_MAX_CHARS
from .filter_index import LeafSet, alternatives

__all__ = ["MAX_FILTER_COMPARISONS", "MAX_FILTER_DEPTH", "OPERATORS", "CompiledFilter", "FilterGroup", "FilterLeaf", "compile_filter", "compile_for", "json_path",
           "parse_filter", "to_postgres", "to_sqlite"]

OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists")
_ORDER_SQL = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
MAX_FILTER_COMPARISONS = 500
MAX_FILTER_DEPTH = 16
_MAX_IN = MAX_FILTER_COMPARISONS
_MAX_DEPTH = MAX_FILTER_DEPTH


@dataclass(frozen=True)
class CompiledFilter:
    sql: str
    params: tuple[Any, ...]
    #: Leaf-index supersets of the matches (robotmem.search.filter_index), to avoid scanning every row
    #: (SQLite; PostgreSQL's GIN index plays that part).
    candidates: tuple[LeafSet, ...] = ()


@dataclass(frozen=True)
class FilterLeaf:
    """One comparison: ``op`` of the field at ``path`` (object keys) with ``value``."""

    op: str
    path: tuple[str, ...]
    value: Any


@dataclass(frozen=True)
class FilterGroup:
    kind: Literal["and", "or"]
    items: tuple[FilterNode, ...]


FilterNode = Union[FilterLeaf, FilterGroup]


def json_path(dot_path: str, field: str) -> str:
    """``params.grip_force.value`` -> ``$."params"."grip_force"."value"``.

    Keys are quoted with ``"`` and ``\\`` backslash-escaped, so any key without a dot works.
    """
    return _sqlite_path(_path_parts(dot_path, field))


def _sqlite_path(parts: tuple[str, ...]) -> str:
    return "$" + "".join('."' + part.replace("\\", "\\\\").replace('"', '\\"') + '"' for part in parts)


def _path_parts(dot_path: Any, field: str) -> tuple[str, ...]:
    if not isinstance(dot_path, str) or not dot_path or dot_path.startswith("$"):
        raise ValidationError(f"{field}: {brief(dot_path)} is not a dot path such as 'task.success'", field=field)
    if len(dot_path) > DOT_PATH_MAX_CHARS:
        raise ValidationError(f"{field}: a dot path of {len(dot_path)} characters; the limit is {DOT_PATH_MAX_CHARS}",
                              field=field)
    validation.unicode_text(dot_path, field)
    if "\x00" in dot_path:
        # No stored key holds one (contexts refuse it: validation.check_json_tree), SQLite's JSON path
        # parser rejects it ("bad JSON path") and PostgreSQL text cannot hold it: a clear refusal
        # here instead of a storage error on every backend.
        raise ValidationError(f"{field}: a dot path must not hold a NUL character (\\x00)", field=field)
    parts = tuple(dot_path.split("."))
    if any(part == "" for part in parts):
        raise ValidationError(f"{field}: {brief(dot_path)} has an empty segment", field=field)
    return parts


# -- parsing (validation happens here, once, for every store) ---------------------------


def parse_filter(spec: dict[str, Any], field: str = "context_filter") -> FilterNode:
    node = _parse_object(spec, field, depth=0)
    comparisons = _comparisons(node)
    if comparisons > MAX_FILTER_COMPARISONS:
        raise ValidationError(
            f"{field} has {comparisons} comparisons; the limit is {MAX_FILTER_COMPARISONS} "
            "(each $in/$nin value counts as one)", field=field,
        )
    return node


def _comparisons(node: FilterNode) -> int:
    if isinstance(node, FilterGroup):
        return sum(_comparisons(item) for item in node.items)
    return len(node.value) if node.op in ("$in", "$nin") else 1


def _parse_object(spec: Any, field: str, depth: int) -> FilterNode:
    if depth > _MAX_DEPTH:
        raise ValidationError(f"{field} is nested more than {_MAX_DEPTH} levels deep", field=field)
    if not isinstance(spec, dict):
        raise ValidationError(f"{field} must be a JSON object, got {type(spec).__name__}", field=field)
    return FilterGroup("and", tuple(_parse_clause(key, value, field, depth) for key, value in spec.items()))


def _parse_clause(key: Any, value: Any, field: str, depth: int) -> FilterNode:
    if not isinstance(key, str):
        raise ValidationError(f"{field}: keys must be strings, got {brief(key)}", field=field)
    if key in ("$and", "$or"):
        if not isinstance(value, list) or not value:
            raise ValidationError(f"{field}.{key} must be a non-empty list of filters", field=f"{field}.{key}")
        items = tuple(_parse_object(item, f"{field}.{key}[{i}]", depth + 1) for i, item in enumerate(value))
        return FilterGroup("and" if key == "$and" else "or", items)
    if key.startswith("$"):
        raise ValidationError(
            f"{field}: unknown top-level operator {brief(key)}; use $and, $or or a dot path", field=f"{field}.{key}"
        )
    where = f"{field}.{key}"
    path = _path_parts(key, where)
    if isinstance(value, dict):
        if not value:
            raise ValidationError(f"{where}: empty operator object", field=where)
        unknown = [op for op in value if op not in OPERATORS]
        if unknown:
            raise ValidationError(
                f"{where}: unknown operator {brief(unknown[0])}; allowed: {', '.join(OPERATORS)}", field=where
            )
        return FilterGroup("and", tuple(_parse_op(op, arg, path, where) for op, arg in value.items()))
    return _parse_op("$eq", value, path, where)


def _parse_op(op: str, arg: Any, path: tuple[str, ...], where: str) -> FilterLeaf:
    if op == "$exists":
        if not isinstance(arg, bool):
            raise ValidationError(f"{where}.$exists takes true or false", field=where)
        return FilterLeaf(op, path, arg)
    if op in ("$eq", "$ne"):
        _scalar_kind(arg, where)
        return FilterLeaf(op, path, arg)
    if op in ("$in", "$nin"):
        if not isinstance(arg, list) or not arg or len(arg) > _MAX_IN:
            raise ValidationError(f"{where}.{op} takes a non-empty list of at most {_MAX_IN} values", field=where)
        for item in arg:
            _scalar_kind(item, where)
        return FilterLeaf(op, path, tuple(arg))
    kind = _scalar_kind(arg, where)
    if kind not in ("number", "text"):
        raise ValidationError(f"{where}.{op} compares numbers or strings, not {kind}", field=where)
    return FilterLeaf(op, path, arg)


def _scalar_kind(value: Any, where: str) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise ValidationError(f"{where}: integers must fit in 64 bits", field=where)
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValidationError(f"{where}: numbers must be finite", field=where)
        return "number"
    if isinstance(value, str):
        if "\x00" in value:
            # No stored context holds one (validation.py refuses them), and PostgreSQL cannot take
            # one as a parameter: refused here on both stores, naming the filter.
            raise ValidationError(f"{where}: compares with a string holding a NUL character (\\x00), "
                                  "which no stored context holds", field=where)
        return "text"
    raise ValidationError(
        f"{where}: compare with a string, number, boolean or null, not {type(value).__name__}", field=where
    )


def compile_filter(spec: dict[str, Any], column: str = "m.context", field: str = "context_filter") -> CompiledFilter:
    """The filter as SQLite SQL (the embedded store's dialect), with its leaf-index candidate sets."""
    compiled = to_sqlite(parse_filter(spec, field), column)
    return CompiledFilter(sql=compiled.sql, params=compiled.params, candidates=alternatives(spec))


def compile_for(spec: dict[str, Any], dialect: str) -> CompiledFilter:
    """The filter in the SQL of a store: "sqlite" or "postgresql"."""
    return to_postgres(parse_filter(spec)) if dialect == "postgresql" else compile_filter(spec)


# -- SQLite: json_type / json_extract over the JSONB blob --------------------------------


def to_sqlite(node: FilterNode, column: str = "m.context") -> CompiledFilter:
    params: list[Any] = []
    return CompiledFilter(sql=_sqlite_node(node, column, params), params=tuple(params))


def _sqlite_node(node: FilterNode, column: str, params: list[Any]) -> str:
    if isinstance(node, FilterGroup):
        if not node.items:
            return "1"
        return "(" + (" AND " if node.kind == "and" else " OR ").join(
            _sqlite_node(item, column, params) for item in node.items) + ")"
    path = _sqlite_path(node.path)
    if node.op == "$exists":
        params.append(path)
        return f"(json_type({column}, ?) IS {'NOT ' if node.value else ''}NULL)"
    if node.op == "$eq":
        return _sqlite_equals(node.value, column, path, params)
    if node.op == "$ne":
        return f"(NOT coalesce({_sqlite_equals(node.value, column, path, params)}, 0))"
    if node.op in ("$in", "$nin"):
        any_equal = "(" + " OR ".join(_sqlite_equals(v, column, path, params) for v in node.value) + ")"
        return any_equal if node.op == "$in" else f"(NOT coalesce({any_equal}, 0))"
    params.extend([path, path, node.value])
    types = "('integer', 'real')" if _scalar_kind(node.value, "") == "number" else "('text')"
    return f"(json_type({column}, ?) IN {types} AND json_extract({column}, ?) {_ORDER_SQL[node.op]} ?)"


def _sqlite_equals(value: Any, column: str, path: str, params: list[Any]) -> str:
    kind = _scalar_kind(value, "")
    if kind == "null":
        params.append(path)
        return f"(json_type({column}, ?) = 'null')"
    if kind == "bool":
        params.append(path)
        return f"(json_type({column}, ?) = '{'true' if value else 'false'}')"
    params.extend([path, path, value])
    types = "('integer', 'real')" if kind == "number" else "('text')"
    return f"(json_type({column}, ?) IN {types} AND json_extract({column}, ?) = ?)"


# -- PostgreSQL: jsonb containment (GIN-indexed) and strict jsonpath ----------------------


def to_postgres(node: FilterNode, column: str = "m.context") -> CompiledFilter:
    """Equality is ``@>`` containment (typed like SQLite's rule; served by the GIN index);
    order and existence are strict jsonpath, which never looks inside arrays."""
    params: list[Any] = []
    return CompiledFilter(sql=_pg_node(node, column, params), params=tuple(params))


def _pg_node(node: FilterNode, column: str, params: list[Any]) -> str:
    if isinstance(node, FilterGroup):
        if not node.items:
            return "TRUE"
        return "(" + (" AND " if node.kind == "and" else " OR ").join(
            _pg_node(item, column, params) for item in node.items) + ")"
    if node.op == "$exists":
        params.append(_pg_jsonpath(node.path))
        found = f"coalesce(jsonb_path_exists({column}, ?::jsonpath, '{{}}', true), false)"
        return found if node.value else f"(NOT {found})"
    if node.op in ("$eq", "$in"):
        values = [node.value] if node.op == "$eq" else list(node.value)
        return "(" + " OR ".join(_pg_contains(v, node.path, column, params) for v in values) + ")"
    if node.op in ("$ne", "$nin"):
        values = [node.value] if node.op == "$ne" else list(node.value)
        return "(NOT (" + " OR ".join(_pg_contains(v, node.path, column, params) for v in values) + "))"
    params.extend([_pg_jsonpath(node.path) + f" ? (@ {_ORDER_SQL[node.op]} $v)", json.dumps({"v": node.value})])
    return f"coalesce(jsonb_path_exists({column}, ?::jsonpath, ?::jsonb, true), false)"


def _pg_contains(value: Any, path: tuple[str, ...], column: str, params: list[Any]) -> str:
    nested: Any = value
    for part in reversed(path):
        nested = {part: nested}
    params.append(json.dumps(nested))
    return f"{column} @> ?::jsonb"


def _pg_jsonpath(path: tuple[str, ...]) -> str:
    return "strict $" + "".join("." + json.dumps(part) for part in path)
