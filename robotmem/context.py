"""Context objects: the structured JSON that travels with every memory.

A context is a JSON object. Four conventional sections carry meaning for recall and
consolidation: ``params`` (the parameters an action used), ``spatial`` (where),
``robot`` (which robot) and ``task`` (what, and whether it succeeded). Any other keys
are kept as they are.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from typing import Any

from . import validation
from .errors import ValidationError
from .models import CONTEXT_MAX_BYTES, CONTEXT_SECTIONS

__all__ = ["canonical_json", "content_hash", "lift_sections", "normalize_text", "parse_context"]

_MAX_DEPTH = 32


def parse_context(value: Any, field: str = "context") -> dict[str, Any]:
    """Validate a context (dict or JSON string) and return a plain JSON-safe dict."""
    obj = validation.json_object(value, field) or {}
    _check_json_safe(obj, field, 0)
    size = len(canonical_json(obj).encode("utf-8", "surrogatepass"))
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
    return obj


def _check_json_safe(value: Any, path: str, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise ValidationError(f"{path} is nested too deeply", field=path)
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(f"{path} keys must be strings", field=path)
            _check_json_safe(item, f"{path}.{key}", depth + 1)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_json_safe(item, f"{path}[{index}]", depth + 1)
    elif isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValidationError(f"{path} must be a finite number", field=path)
    elif value is not None and not isinstance(value, (str, int, bool)):
        raise ValidationError(f"{path} holds a {type(value).__name__}, which is not JSON", field=path)


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def normalize_text(text: str) -> str:
    """Case-, width- and whitespace-insensitive form used for duplicate detection."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(folded.split())


def content_hash(text: str, context: dict[str, Any]) -> str:
    payload = normalize_text(text) + "\x00" + canonical_json(context)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def lift_sections(context: dict[str, Any]) -> dict[str, Any]:
    """The four conventional sections as top-level keys (empty dicts when absent)."""
    return {section: context.get(section) or {} for section in CONTEXT_SECTIONS}
