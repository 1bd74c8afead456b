"""Context objects: the structured JSON that travels with every memory.

A context is a JSON object. Four conventional sections carry meaning for recall and
consolidation: ``params`` (the parameters an action used), ``spatial`` (where),
``robot`` (which robot) and ``task`` (what, and whether it succeeded). Any other keys
are kept as they are.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from typing import Any

from . import validation
from .errors import ValidationError
from .models import CONTEXT_MAX_BYTES, CONTEXT_MAX_DEPTH, CONTEXT_SECTIONS

__all__ = ["canonical_json", "content_hash", "content_hash_json", "lift_sections", "load_stored_json",
           "normalize_text", "parse_context", "parse_context_json"]


def parse_context(value: Any, field: str = "context") -> dict[str, Any]:
    """Validate a context (dict or JSON string) and return a plain JSON-safe dict."""
    return parse_context_json(value, field)[0]


def parse_context_json(value: Any, field: str = "context") -> tuple[dict[str, Any], str]:
    """``parse_context`` and the context's canonical JSON, serialised once for the size check, the
    content hash and the stored row (bulk writes pay for every serialisation)."""
    obj = validation.json_object(value, field, max_depth=CONTEXT_MAX_DEPTH) or {}
    text = canonical_json(obj)
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    if size > CONTEXT_MAX_BYTES:
        raise ValidationError(
            f"{field} is {size} bytes as JSON; the limit is {CONTEXT_MAX_BYTES} "
            "(put bulk data in a perception's data payload)", field=field,
        )
    for section in CONTEXT_SECTIONS:
        if section in obj and not isinstance(obj[section], dict):
            raise ValidationError(
                f"{field}.{section} must be a JSON object, got {type(obj[section]).__name__}",
                field=f"{field}.{section}",
            )
    return obj, text


# One encoder for every call: json.dumps with options builds a new one each time, a sixth of the
# 6 us a bulk insert's context took to encode.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    return _CANONICAL.encode(value)


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _stored_int(digits: str) -> int | float:
    """An integer of stored JSON: beyond 64 bits it can only have been a float (robotmem refuses such
    integers at write), which PostgreSQL's jsonb wrote out in full (1e300 as 301 digits)."""
    value = int(digits)
    return value if _INT64_MIN <= value <= _INT64_MAX else float(digits)


# One decoder for every call: json.loads with parse_int builds a new one each time. The hook costs
# about 0.1 us an integer (a typical context: 3.7 us to parse instead of 3.4); a regex looking for
# a long digit run first cost 1.7 us a context.
_STORED = json.JSONDecoder(parse_int=_stored_int)


def load_stored_json(text: str | bytes) -> Any:
    """JSON read back from a store (a context, a session's context, a group value): its numbers as
    they were written. PostgreSQL's jsonb keeps numbers as decimals and writes a float of 1e16 or
    more as its digits (``1e300`` -> ``1000...0``); an integer beyond 64 bits is read as the float
    it was."""
    return _STORED.decode(text if isinstance(text, str) else text.decode("utf-8", "surrogatepass"))


def normalize_text(text: str) -> str:
    """Case-, width- and whitespace-insensitive form used for duplicate detection."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(folded.split())


def content_hash(text: str, context: dict[str, Any]) -> str:
    return content_hash_json(text, canonical_json(context))


def content_hash_json(text: str, context_json: str) -> str:
    """``content_hash`` of a context already in canonical JSON."""
    payload = normalize_text(text) + "\x00" + context_json
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def lift_sections(context: dict[str, Any]) -> dict[str, Any]:
    """The four conventional sections as top-level keys (empty dicts when absent)."""
    return {section: context.get(section) or {} for section in CONTEXT_SECTIONS}
