"""When do two facts happen under the same circumstances? The context half of the merge rule.

Two contexts *agree* when

* ``robot.id``, ``task.name`` and ``task.success`` are equal (a missing value equals only
  a missing value: ``success`` absent is not ``false``);
* their ``params`` sections have the same keys, recursively, and equal leaves, where
  numbers match within ``max(abs_tolerance, rel_tolerance * max(|a|, |b|))`` and strings,
  booleans and nulls match exactly. ``{"value": 5, "unit": "N"}`` shapes need no special
  case: the units are strings and must be equal, the values are numbers.

Everything else in a context (``spatial``, free keys, ``episode.outcome``) is not compared.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

__all__ = ["Tolerance", "context_bucket", "contexts_agree", "values_close"]


@dataclass(frozen=True)
class Tolerance:
    relative: float
    absolute: float


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def values_close(a: Any, b: Any, tol: Tolerance) -> bool:
    """Recursive equality of JSON values with a tolerance on numbers."""
    if _is_number(a) and _is_number(b):
        return math.isclose(float(a), float(b), rel_tol=tol.relative, abs_tol=tol.absolute)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(values_close(a[k], b[k], tol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(values_close(x, y, tol) for x, y in zip(a, b))
    # Different JSON types (a number vs a string, true vs 1) never agree.
    return type(a) is type(b) and bool(a == b)


def _section(context: dict[str, Any], name: str) -> dict[str, Any]:
    value = context.get(name)
    return value if isinstance(value, dict) else {}


_MISSING = object()


def _identity(context: dict[str, Any]) -> tuple[Any, Any, Any]:
    robot, task = _section(context, "robot"), _section(context, "task")
    return robot.get("id", _MISSING), task.get("name", _MISSING), task.get("success", _MISSING)


def contexts_agree(a: dict[str, Any], b: dict[str, Any], tol: Tolerance) -> bool:
    ida, idb = _identity(a), _identity(b)
    if not all(x is y if x is _MISSING or y is _MISSING else values_close(x, y, _EXACT) for x, y in zip(ida, idb)):
        return False
    return values_close(_section(a, "params"), _section(b, "params"), tol)


_EXACT = Tolerance(relative=0.0, absolute=0.0)


def _shape(value: Any) -> Hashable:
    """The tolerance-free part of a params section: its keys and non-numeric leaves."""
    if isinstance(value, dict):
        return tuple(sorted((k, _shape(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("list", tuple(_shape(v) for v in value))
    if _is_number(value):
        return "number"
    return (type(value).__name__, value)


def context_bucket(context: dict[str, Any]) -> Hashable:
    """A key that is equal for any two agreeing contexts (so only facts in one bucket are compared)."""
    robot_id, task_name, success = _identity(context)
    identity = tuple("<missing>" if v is _MISSING else _shape(v) for v in (robot_id, task_name, success))
    return identity, _shape(_section(context, "params"))
