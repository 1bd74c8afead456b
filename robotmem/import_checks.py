"""Checks for one line of an export file: imported records are validated like tool calls.

An export file is input like any other: a hand-edited or hostile line must not get into
the store (a ``reinforced_at`` of "yesterday" or an 8-float vector used to break recall
for a whole collection). Each check returns the record with every field it will write
checked, and derived fields (search tokens, content hash, payload summary) recomputed
rather than trusted (the file's content hash is kept only when it is one of the hashes
recomputed from the record; see ``_learned_hash``).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import validation
from .context import content_hash, current_hash_of, parse_context
from .errors import ValidationError
from .models import (
    DESCRIPTION_MAX_CHARS, EPOCH_MAX, EPOCH_MIN, MEMORY_TYPES, PERCEPTION_TYPES, REASON_MAX_CHARS, STATUSES,
)
from .payload import check_stored_payload, decode_payload, summarize_payload
from .store.tokens import memory_search_text

__all__ = ["ImportLimits", "check_memory", "check_session"]

_TIMES = ("reinforced_at", "first_seen", "last_seen", "created_at", "occurred_at", "updated_at")


@dataclass(frozen=True)
class ImportLimits:
    """What the importing store accepts: its payload limit and its embedding model."""

    max_payload_bytes: int
    model_id: str | None
    dim: int | None


#: Units a stored time too large for seconds may have been written in (ms, µs, ns since 1970),
#: tried in this order: the first that brings it into 1970..9999 is taken.
_TIME_UNITS = (1e3, 1e6, 1e9)


def _time(value: Any, field: str, adjusted: list[tuple[str, str]], *, optional: bool = False) -> float | None:
    """A stored time. Versions before the 1970..9999 UTC range (the one a tool call's occurred_at
    is held to) stored what they were given, and one such line must not keep a whole backup from
    being restored: a time that is milliseconds, microseconds or nanoseconds since 1970 is read
    in seconds (``adjusted``: (field, "rescaled")); any other is brought to the range's nearest end
    ((field, "clamped"))."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise ValidationError(f"{field} must be a finite number of epoch seconds", field=field)
    if EPOCH_MIN <= value <= EPOCH_MAX:
        return float(value)  # finite and in range: what validation.epoch_seconds would return
    # Past what nanoseconds can reach, no unit brings it into range (and an int beyond float's
    # range, 10**400, would overflow in the division): clamped.
    for unit in _TIME_UNITS if EPOCH_MAX < value <= EPOCH_MAX * _TIME_UNITS[-1] else ():
        if EPOCH_MIN <= value / unit <= EPOCH_MAX:
            adjusted.append((field, "rescaled"))
            return float(value / unit)
    adjusted.append((field, "clamped"))
    return EPOCH_MIN if value < EPOCH_MIN else EPOCH_MAX


def _count(value: Any, field: str) -> int:
    # Bounded as SQLite and PostgreSQL store integers: beyond 64 bits the write failed half-way
    # through an import (OverflowError, "integer out of range") after its sessions were committed.
    return validation.integer(value, field, low=0, high=validation.INT64_MAX)


def _flag(value: Any, field: str) -> int:
    if value not in (0, 1) or isinstance(value, float):
        raise ValidationError(f"{field} must be 0, 1, true or false", field=field)
    return int(value)


def _choice(value: Any, allowed: tuple[str, ...], field: str) -> str:
    if value not in allowed:
        raise ValidationError(f"{field} must be one of {', '.join(allowed)}", field=field)
    return str(value)


def _base64(value: Any, field: str) -> bytes:
    if not isinstance(value, str):
        raise ValidationError(f"{field} must be base64 text", field=field)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValidationError(f"{field} is not valid base64", field=field) from exc


def check_session(r: dict[str, Any]) -> dict[str, Any]:
    summary = r["summary"]
    if summary is not None and not isinstance(summary, dict):
        raise ValidationError("summary must be a JSON object or null", field="summary")
    if summary is not None:
        # What every edge refuses in JSON it stores: a lone surrogate stored here made every later
        # export, session listing and MCP sessions read fail (the MCP server exited on it).
        validation.check_json_tree(summary, "summary")
    adjusted: list[tuple[str, str]] = []
    return {
        "id": validation.session_id(r["id"], "id"),
        "collection": validation.collection(r["collection"], ""),
        "context": parse_context(r["context"]),
        "started_at": _time(r["started_at"], "started_at", adjusted),
        "ended_at": _time(r["ended_at"], "ended_at", adjusted, optional=True),
        "outcome_score": validation.optional_score(r["outcome_score"]),
        "summary": summary,
        "times_adjusted": adjusted,
    }


def check_memory(r: dict[str, Any], limits: ImportLimits) -> dict[str, Any]:
    kind = _choice(r["type"], MEMORY_TYPES, "type")
    content = validation.text(r["content"], "content", max_len=DESCRIPTION_MAX_CHARS)
    context = parse_context(r["context"])
    adjusted: list[tuple[str, str]] = []
    checked: dict[str, Any] = {
        "id": validation.integer(r["id"], "id", low=1),
        "collection": validation.collection(r["collection"], ""),
        "session_id": None if r["session_id"] is None else validation.session_id(r["session_id"]),
        "type": kind,
        "perception_type": None if r["perception_type"] is None
        else _choice(r["perception_type"], PERCEPTION_TYPES, "perception_type"),
        "content": content,
        "search_text": memory_search_text(content, context),
        "context": context,
        "content_hash": _learned_hash(content, context, r["session_id"], r["content_hash"]),
        "protected": _flag(r["protected"], "protected"),
        "confidence": validation.unit_interval(r["confidence"], "confidence"),
        "evidence_count": _count(r["evidence_count"], "evidence_count"),
        "status": _choice(r["status"], STATUSES, "status"),
        "superseded_by": None if r["superseded_by"] is None else validation.integer(r["superseded_by"],
                                                                                     "superseded_by", low=1),
        "absorbed": _ids(r["absorbed"]),
        "forgotten_at": _time(r["forgotten_at"], "forgotten_at", adjusted, optional=True),
        "forget_reason": None if r["forget_reason"] is None
        else validation.text(r["forget_reason"], "forget_reason", max_len=REASON_MAX_CHARS),
        "access_count": _count(r["access_count"], "access_count"),
        "last_accessed": _time(r["last_accessed"], "last_accessed", adjusted, optional=True),
        "embed": _flag(r.get("embed", 1), "embed"),
        "uid": _uid(r.get("uid")),
    }
    for name in _TIMES:
        checked[name] = _time(r[name], name, adjusted)
    checked["times_adjusted"] = adjusted
    checked["payload"], checked["payload_summary"] = _payload(r.get("payload"), limits)
    checked["embedding"] = _embedding(r.get("embedding"), limits)
    return checked


def _learned_hash(content: str, context: dict[str, Any], session_id: Any, claimed: Any) -> str:
    """The hash ``learn`` gave this memory: of its text and the context *as the caller wrote it*.

    ``end_session`` adds ``episode.outcome`` to the context of its session's memories and
    keeps their hash (consolidation/writes.py ``attach_outcome``), so the exported context
    is not what was hashed. Hashing it as it is gave an imported fact a hash no store had:
    importing an export into its own store (or twice after a learn) stored every ended
    session's memories again, and a later ``learn`` of the fact made a second live copy.
    The caller's context cannot be recovered exactly (no ``episode`` key and an empty one
    both end as ``{"episode": {"outcome": s}}``), so the file's hash is taken only when it is
    the hash of this text with one of the contexts end_session could have started from;
    anything else (a hand-edited or forged hash) is replaced by the hash of the context as
    it is, as before. Either way the hash belongs to this text: it cannot make a later
    ``learn`` of another text a duplicate of this memory.
    """
    # A file of an earlier version: its form of the hash (current_hash_of).
    learned = current_hash_of(content, context, session_id is not None, claimed)
    return content_hash(content, context) if learned is None else learned


_UID = re.compile(r"[0-9a-f]{32}")


def _uid(value: Any) -> str | None:
    """The memory's identity across stores; None in a file written before memories had one."""
    if value is None:
        return None
    if not isinstance(value, str) or not _UID.fullmatch(value):
        raise ValidationError("uid must be 32 lowercase hexadecimal digits", field="uid")
    return value


def _ids(value: Any) -> list[int]:
    if not isinstance(value, list):
        raise ValidationError("absorbed must be a list of memory ids", field="absorbed")
    return [validation.integer(v, "absorbed", low=1) for v in value]


def _payload(value: Any, limits: ImportLimits) -> tuple[bytes | None, dict[str, Any] | None]:
    if value is None:
        return None, None
    blob = _base64(value, "payload")
    if len(blob) > limits.max_payload_bytes:
        raise ValidationError(f"payload is {len(blob)} bytes; the limit is {limits.max_payload_bytes}",
                              field="payload")
    try:
        decoded = decode_payload(blob)
    except Exception as exc:
        raise ValidationError("payload is not a robotmem payload (msgpack)", field="payload") from exc
    # Valid msgpack may still hold what no perception's data can (a bytes key, an ext type robotmem
    # does not write): its summary or get_data's JSON would fail on it, after the import began writing.
    check_stored_payload(decoded, "payload")
    return blob, summarize_payload(decoded, len(blob))


def _embedding(value: Any, limits: ImportLimits) -> tuple[str, np.ndarray] | None:
    """A vector kept only when it is the active model's, of its size: others are re-embedded."""
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("model_id"), str):
        raise ValidationError("embedding must be {model_id, vector}", field="embedding")
    blob = _base64(value.get("vector"), "embedding.vector")
    if len(blob) % 4:
        raise ValidationError("embedding.vector is not float32 values", field="embedding.vector")
    vector = np.frombuffer(blob, dtype=np.float32)
    if not np.isfinite(vector).all():
        raise ValidationError("embedding.vector holds non-finite values", field="embedding.vector")
    if value["model_id"] != limits.model_id or vector.size != limits.dim:
        return None
    return value["model_id"], vector
