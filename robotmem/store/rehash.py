"""Stored content hashes taken by an earlier rule, made today's (both stores' migrations)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from itertools import product
from typing import Any

from ..context import content_hash, current_hash_of, nfkc_fold, normalize_text

__all__ = ["refreshed_hashes"]

#: A context with more zeros than this is not searched for the ones that were -0.0 (2**6 tries).
_MAX_ZEROS = 6


def refreshed_hashes(rows: Iterable[tuple[Any, str, dict[str, Any], bool, str]]) -> list[tuple[str, Any]]:
    """(new hash, id) of the rows (id, content, context, in a session, stored hash) whose hash an
    earlier rule took (``current_hash_of``): of the text's NFKC fold (``10⁶`` hashed as ``106``), of
    ``-0.0`` as written (PostgreSQL reads it back as ``0.0``: each of its zeros may have been one).
    A hash of none of the contexts the memory can have been learned with (hand-edited) is left alone.

    Two live facts cannot end with one hash: the earlier fold made their texts one and a -0.0 was
    never stored beside an equal 0.0 on PostgreSQL, so a store kept one of them (on SQLite a fact
    with -0.0 and one with 0.0 become duplicates of each other; ``learn`` then finds the older)."""
    changed = []
    for memory_id, content, context, in_session, digest in rows:
        if not _may_differ(content, context) or digest == content_hash(content, context):
            continue  # the text folds as before and no zero was signed, or the hash is today's already
        current = None
        for variant in _signed_zeros(context):
            current = current_hash_of(content, variant, in_session, digest)
            if current is not None:
                break
        if current is not None and current != digest:
            changed.append((current, memory_id))
    return changed


def _may_differ(content: str, context: dict[str, Any]) -> bool:
    """An earlier rule can have hashed this memory otherwise: its text folds otherwise (``nfkc_fold``)
    or its context holds a zero float (``-0.0``, or ``0.0`` PostgreSQL read back from one). Checked
    first because a migration selects far more rows than it rewrites (every non-ASCII text)."""
    return nfkc_fold(content) != normalize_text(content) or any(True for _ in _zeros(context, either_sign=True))


def _signed_zeros(context: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """``context``, then it with each choice of its ``0.0`` floats written ``-0.0``."""
    yield context
    zeros = sum(1 for _ in _zeros(context))
    if not 0 < zeros <= _MAX_ZEROS:
        return
    for signs in product((False, True), repeat=zeros):
        if any(signs):
            flips = iter(signs)
            yield _with_signs(context, flips)


def _zeros(value: Any, *, either_sign: bool = False) -> Iterator[None]:
    if isinstance(value, float) and value == 0.0 and (either_sign or math.copysign(1.0, value) > 0):
        yield None
    elif isinstance(value, dict):
        for v in value.values():
            yield from _zeros(v, either_sign=either_sign)
    elif isinstance(value, list):
        for v in value:
            yield from _zeros(v, either_sign=either_sign)


def _with_signs(value: Any, flips: Iterator[bool]) -> Any:
    if isinstance(value, float) and value == 0.0 and math.copysign(1.0, value) > 0:
        return -0.0 if next(flips) else 0.0
    if isinstance(value, dict):
        return {k: _with_signs(v, flips) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_signs(v, flips) for v in value]
    return value
