"""The confidence-decay law, written once and rendered both as SQL and as numpy.

A memory stores ``confidence`` as of ``reinforced_at``; what it is worth at ``now`` is
``confidence * 2^(-max(0, now - reinforced_at) / half_life)``, and protected memories do
not decay; nor does a memory an unset clock stamped (``reinforced_at`` before
PLAUSIBLE_SINCE) until consolidation brings its stamp to the present. SQL filters and updates need the law inside statements; the vector index and
row reads need it in Python. :func:`decay_law` states it once over an operations namespace,
and each rendering supplies the operations, so the two cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

__all__ = [
    "FUTURE_TOLERANCE_S",
    "NUMPY_OPS",
    "PLAUSIBLE_SINCE",
    "SQL_OPS",
    "Ops",
    "Sql",
    "decay_law",
    "decayed_confidence",
    "effective_confidence",
    "effective_confidence_sql",
    "reinforced_confidence",
]

#: A clock reading before 2020-01-01T00:00:00Z comes from a clock that was never set (an
#: RTC lost at boot reads 1970): it ages and archives nothing, and what it stamps is brought
#: to the present by the first consolidation pass under a set clock (docs/consolidation.md).
PLAUSIBLE_SINCE = 1_577_836_800.0

#: A ``reinforced_at`` more than this far ahead of a set clock was stamped by a clock that ran
#: ahead (NTP a year off for an episode) and is brought back to the clock's reading.
FUTURE_TOLERANCE_S = 86_400.0


@dataclass(frozen=True)
class Sql:
    """A SQL expression with its ``?`` parameters in the order they appear."""

    text: str
    params: tuple[Any, ...] = field(default=())

    @staticmethod
    def param(value: Any) -> Sql:
        return Sql("?", (value,))

    def _join(self, op: str, other: Sql | float, *, flip: bool = False) -> Sql:
        rhs = other if isinstance(other, Sql) else Sql(repr(float(other)))
        left, right = (rhs, self) if flip else (self, rhs)
        return Sql(f"({left.text} {op} {right.text})", left.params + right.params)

    def __sub__(self, other: Sql | float) -> Sql:
        return self._join("-", other)

    def __rsub__(self, other: float) -> Sql:
        return self._join("-", other, flip=True)

    def __mul__(self, other: Sql | float) -> Sql:
        return self._join("*", other)

    def __truediv__(self, other: Sql | float) -> Sql:
        return self._join("/", other)

    def __neg__(self) -> Sql:
        return Sql(f"(-{self.text})", self.params)

    def __ge__(self, other: Sql | float) -> Sql:
        return self._join(">=", other)

    def __le__(self, other: Sql | float) -> Sql:
        return self._join("<=", other)

    def __and__(self, other: Sql) -> Sql:
        return self._join("AND", other)

    def __invert__(self) -> Sql:
        return Sql(f"(NOT {self.text})", self.params)


class Ops(Protocol):
    """The few functions the shared rules use besides arithmetic, comparison and ``&``."""

    def value(self, x: float) -> Any: ...
    def exp2(self, x: Any) -> Any: ...
    def clamp0(self, x: Any) -> Any: ...
    def where(self, cond: Any, then: Any, otherwise: Any) -> Any: ...


class SqlOps:
    def value(self, x: float) -> Sql:
        return Sql.param(x)

    def exp2(self, x: Sql) -> Sql:
        return Sql(f"pow(2.0, {x.text})", x.params)

    def clamp0(self, x: Sql) -> Sql:
        return Sql(f"max(0.0, {x.text})", x.params)

    def where(self, cond: Sql, then: Sql, otherwise: Sql) -> Sql:
        return Sql(f"(CASE WHEN {cond.text} THEN {then.text} ELSE {otherwise.text} END)",
                   cond.params + then.params + otherwise.params)


class NumpyOps:
    def value(self, x: float) -> float:
        return x

    def exp2(self, x: Any) -> Any:
        return np.exp2(x)

    def clamp0(self, x: Any) -> Any:
        return np.maximum(x, 0.0)

    def where(self, cond: Any, then: Any, otherwise: Any) -> Any:
        return np.where(cond, then, otherwise)


class PostgresOps(SqlOps):
    """PostgreSQL raises on float underflow where SQLite returns 0: the exponent is floored
    at -1000 (2^-1000 is 1e-301, zero for every comparison robotmem makes)."""

    def exp2(self, x: Sql) -> Sql:
        return Sql(f"power(2.0::float8, greatest(-1000.0::float8, {x.text}))", x.params)

    def clamp0(self, x: Sql) -> Sql:
        return Sql(f"greatest(0.0::float8, {x.text})", x.params)


SQL_OPS = SqlOps()
POSTGRES_OPS = PostgresOps()
NUMPY_OPS = NumpyOps()


def decay_law(ops: Ops, confidence: Any, reinforced_at: Any, protected: Any, now: Any, half_life_s: Any) -> Any:
    """``confidence * 2^(-age / half_life)``, age = ``max(0, now - reinforced_at)``; a memory stamped
    by an unset clock (``reinforced_at`` before PLAUSIBLE_SINCE) has age 0 until consolidation
    restamps it, and a protected one does not decay."""
    age = ops.where(reinforced_at >= PLAUSIBLE_SINCE, ops.clamp0(now - reinforced_at), ops.value(0.0))
    return ops.where(protected, confidence, confidence * ops.exp2(-age / half_life_s))


def effective_confidence_sql(
    now: float, half_life_s: float, *, table: str = "m", dialect: str = "sqlite"
) -> tuple[str, list[Any]]:
    """The decayed confidence of ``table``'s row as a SQL expression (SQLite or PostgreSQL), with its parameters."""
    ops = POSTGRES_OPS if dialect == "postgresql" else SQL_OPS
    expr = decay_law(ops, Sql(f"{table}.confidence"), Sql(f"{table}.reinforced_at"), Sql(f"{table}.protected"),
                     Sql.param(now), Sql.param(half_life_s))
    return expr.text, list(expr.params)


def decayed_confidence(
    conf0: np.ndarray, reinforced_at: np.ndarray, protected: np.ndarray, now: float, half_life_s: float
) -> np.ndarray:
    """The decayed confidence of many rows at once."""
    return np.asarray(decay_law(NUMPY_OPS, conf0, reinforced_at, protected, now, half_life_s))


def effective_confidence(
    confidence: float, reinforced_at: float, protected: bool, now: float, half_life_s: float
) -> float:
    """The decayed confidence of one row."""
    return float(decay_law(NUMPY_OPS, confidence, reinforced_at, bool(protected), now, half_life_s))


def reinforced_confidence(decayed: float, fresh: float, *, step: float, evidence: int, ceiling: float) -> float:
    """Confidence after reinforcement: ``min(ceiling, max(decayed, fresh) + step * evidence)``.

    ``decayed`` is the survivor's confidence at the reinforcing clock, ``fresh`` what the new
    evidence is worth on its own (a fresh fact's confidence): confirming a fact never leaves it
    below what learning it fresh would have. The SQL statements of both stores apply this rule."""
    return min(ceiling, max(decayed, fresh) + step * evidence)
