"""Stored content hashes taken under an earlier text fold, made today's (both stores' migrations)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..context import current_hash_of, nfkc_fold, normalize_text

__all__ = ["refolded_hashes"]


def refolded_hashes(rows: Iterable[tuple[Any, str, dict[str, Any], bool, str]]) -> list[tuple[str, Any]]:
    """(new hash, id) of the rows (id, content, context, in a session, stored hash) whose hash was
    taken of the text's NFKC fold where today's fold differs (``10⁶``, hashed as ``106``). A hash
    of none of the contexts the memory can have been learned with (hand-edited) is left alone.

    Two live facts cannot end with one hash: the earlier fold made their texts one, so a store
    kept one of them, and today's fold of a changed text holds a character no NFKC fold does."""
    changed = []
    for memory_id, content, context, in_session, digest in rows:
        if nfkc_fold(content) == normalize_text(content):
            continue
        current = current_hash_of(content, context, in_session, digest)
        if current is not None and current != digest:
            changed.append((current, memory_id))
    return changed
