"""A plain-Python evaluator of the filter grammar: the reference the SQL compiler is checked against."""

from __future__ import annotations

from typing import Any

_MISSING = object()


def lookup(context: dict[str, Any], dot_path: str) -> Any:
    value: Any = context
    for part in dot_path.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _equal(field: Any, operand: Any) -> bool:
    if field is _MISSING:
        return False
    if operand is None:
        return field is None
    if isinstance(operand, bool):
        return isinstance(field, bool) and field == operand
    if isinstance(operand, (int, float)):
        return isinstance(field, (int, float)) and not isinstance(field, bool) and field == operand
    return isinstance(field, str) and field == operand


def _order(field: Any, op: str, operand: Any) -> bool:
    if isinstance(operand, str):
        if not isinstance(field, str):
            return False
    elif not isinstance(field, (int, float)) or isinstance(field, bool):
        return False
    return {"$gt": field > operand, "$gte": field >= operand, "$lt": field < operand, "$lte": field <= operand}[op]


def _op(field: Any, op: str, operand: Any) -> bool:
    if op == "$exists":
        return (field is not _MISSING) == operand
    if op == "$eq":
        return _equal(field, operand)
    if op == "$ne":
        return not _equal(field, operand)
    if op == "$in":
        return any(_equal(field, o) for o in operand)
    if op == "$nin":
        return not any(_equal(field, o) for o in operand)
    return _order(field, op, operand)


def matches(context: dict[str, Any], spec: dict[str, Any]) -> bool:
    for key, value in spec.items():
        if key == "$and":
            if not all(matches(context, s) for s in value):
                return False
        elif key == "$or":
            if not any(matches(context, s) for s in value):
                return False
        else:
            field = lookup(context, key)
            ops = value if isinstance(value, dict) else {"$eq": value}
            if not all(_op(field, op, operand) for op, operand in ops.items()):
                return False
    return True
