"""Compile a context filter into one SQL boolean expression over ``json_extract``.

Grammar (see docs/data-model.md)::

    filter    := { clause, ... }                 every clause must hold
    clause    := "dot.path": value               equality
               | "dot.path": { op: operand, ... }
               | "$and": [filter, ...] | "$or": [filter, ...]
    op        := $eq $ne $gt $gte $lt $lte $in $nin $exists

Equality is typed: ``true`` matches JSON true only (not 1), ``5`` matches 5 and 5.0,
``"5"`` matches the string only. Order operators compare numbers with numbers and
strings with strings; a field of another type (or a missing one) does not match.
``$ne`` and ``$nin`` match memories where the field is missing. The compiled SQL is
exact and runs over the whole collection, so it is never a post-filter.

A filter holds at most ``MAX_FILTER_COMPARISONS`` comparisons (an ``$in`` of k values
counts k) and nests at most ``MAX_FILTER_DEPTH`` levels: SQLite refuses expression trees
deeper than 1,000 and more than 32,766 parameters, and a filter past these limits is a
``validation_error`` here rather than a storage error there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError, brief
from .filter_index import LeafSet, alternatives

__all__ = ["MAX_FILTER_COMPARISONS", "MAX_FILTER_DEPTH", "OPERATORS", "CompiledFilter", "compile_filter", "json_path"]

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
    #: Leaf-index supersets of the matches (robotmem.search.filter_index), to avoid scanning every row.
    candidates: tuple[LeafSet, ...] = ()


def json_path(dot_path: str, field: str) -> str:
    """``params.grip_force.value`` -> ``$."params"."grip_force"."value"``.

    Keys are quoted with ``"`` and ``\\`` backslash-escaped, so any key without a dot works.
    """
    if not isinstance(dot_path, str) or not dot_path or dot_path.startswith("$"):
        raise ValidationError(f"{field}: {brief(dot_path)} is not a dot path such as 'task.success'", field=field)
    parts = dot_path.split(".")
    if any(part == "" for part in parts):
        raise ValidationError(f"{field}: {brief(dot_path)} has an empty segment", field=field)
    return "$" + "".join('."' + part.replace("\\", "\\\\").replace('"', '\\"') + '"' for part in parts)


def compile_filter(spec: dict[str, Any], column: str = "m.context", field: str = "context_filter") -> CompiledFilter:
    params: list[Any] = []
    sql = _compile_object(spec, column, field, params, depth=0)
    comparisons = _comparisons(spec)
    if comparisons > MAX_FILTER_COMPARISONS:
        raise ValidationError(
            f"{field} has {comparisons} comparisons; the limit is {MAX_FILTER_COMPARISONS} "
            "(each $in/$nin value counts as one)", field=field,
        )
    return CompiledFilter(sql=sql, params=tuple(params), candidates=alternatives(spec))


def _comparisons(spec: dict[str, Any]) -> int:
    """How many leaf comparisons a filter that compiled holds."""
    total = 0
    for key, value in spec.items():
        if key in ("$and", "$or"):
            total += sum(_comparisons(item) for item in value)
        elif isinstance(value, dict):
            total += sum(len(arg) if op in ("$in", "$nin") else 1 for op, arg in value.items())
        else:
            total += 1
    return total


def _compile_object(spec: Any, column: str, field: str, params: list[Any], depth: int) -> str:
    if depth > _MAX_DEPTH:
        raise ValidationError(f"{field} is nested too deeply", field=field)
    if not isinstance(spec, dict):
        raise ValidationError(f"{field} must be a JSON object, got {type(spec).__name__}", field=field)
    clauses = [_compile_clause(key, value, column, field, params, depth) for key, value in spec.items()]
    return "(" + " AND ".join(clauses) + ")" if clauses else "1"


def _compile_clause(key: Any, value: Any, column: str, field: str, params: list[Any], depth: int) -> str:
    if not isinstance(key, str):
        raise ValidationError(f"{field}: keys must be strings, got {brief(key)}", field=field)
    if key in ("$and", "$or"):
        if not isinstance(value, list) or not value:
            raise ValidationError(f"{field}.{key} must be a non-empty list of filters", field=f"{field}.{key}")
        parts = [
            _compile_object(item, column, f"{field}.{key}[{i}]", params, depth + 1) for i, item in enumerate(value)
        ]
        return "(" + (" AND " if key == "$and" else " OR ").join(parts) + ")"
    if key.startswith("$"):
        raise ValidationError(
            f"{field}: unknown top-level operator {brief(key)}; use $and, $or or a dot path", field=f"{field}.{key}"
        )
    path = json_path(key, f"{field}.{key}")
    where = f"{field}.{key}"
    if isinstance(value, dict):
        if not value:
            raise ValidationError(f"{where}: empty operator object", field=where)
        unknown = [op for op in value if op not in OPERATORS]
        if unknown:
            raise ValidationError(
                f"{where}: unknown operator {brief(unknown[0])}; allowed: {', '.join(OPERATORS)}", field=where
            )
        return "(" + " AND ".join(_compile_op(op, arg, column, path, where, params) for op, arg in value.items()) + ")"
    return _compile_op("$eq", value, column, path, where, params)


def _compile_op(op: str, arg: Any, column: str, path: str, where: str, params: list[Any]) -> str:
    if op == "$exists":
        if not isinstance(arg, bool):
            raise ValidationError(f"{where}.$exists takes true or false", field=where)
        params.append(path)
        return f"(json_type({column}, ?) IS {'NOT ' if arg else ''}NULL)"
    if op == "$eq":
        return _equals(arg, column, path, where, params)
    if op == "$ne":
        return f"(NOT coalesce({_equals(arg, column, path, where, params)}, 0))"
    if op in ("$in", "$nin"):
        if not isinstance(arg, list) or not arg or len(arg) > _MAX_IN:
            raise ValidationError(f"{where}.{op} takes a non-empty list of at most {_MAX_IN} values", field=where)
        any_equal = "(" + " OR ".join(_equals(item, column, path, where, params) for item in arg) + ")"
        return any_equal if op == "$in" else f"(NOT coalesce({any_equal}, 0))"
    return _order(op, arg, column, path, where, params)


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
        return "text"
    raise ValidationError(
        f"{where}: compare with a string, number, boolean or null, not {type(value).__name__}", field=where
    )


def _equals(value: Any, column: str, path: str, where: str, params: list[Any]) -> str:
    kind = _scalar_kind(value, where)
    if kind == "null":
        params.append(path)
        return f"(json_type({column}, ?) = 'null')"
    if kind == "bool":
        params.append(path)
        return f"(json_type({column}, ?) = '{'true' if value else 'false'}')"
    params.extend([path, path, value])
    types = "('integer', 'real')" if kind == "number" else "('text')"
    return f"(json_type({column}, ?) IN {types} AND json_extract({column}, ?) = ?)"


def _order(op: str, value: Any, column: str, path: str, where: str, params: list[Any]) -> str:
    kind = _scalar_kind(value, where)
    if kind not in ("number", "text"):
        raise ValidationError(f"{where}.{op} compares numbers or strings, not {kind}", field=where)
    params.extend([path, path, value])
    types = "('integer', 'real')" if kind == "number" else "('text')"
    return f"(json_type({column}, ?) IN {types} AND json_extract({column}, ?) {_ORDER_SQL[op]} ?)"
