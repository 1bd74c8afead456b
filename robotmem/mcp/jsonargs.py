"""JSON-valued tool parameters arrive either as JSON or as a string holding JSON.

Clients differ: some send ``{"params": {...}}``, others serialise the object into a string
first. Both mean the same thing, so both are accepted here and a malformed string is a
``validation_error`` naming the parameter (never a crash, never silently dropped).
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import ValidationError

__all__ = ["json_object", "json_value"]


def _parse(text: str, field: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "cannot be parsed"
        raise ValidationError(f"{field} is not valid JSON: {detail}", field=field) from exc


def json_object(value: dict[str, Any] | str | None, field: str) -> dict[str, Any] | None:
    """An optional JSON object given as a dict or a JSON string; ``""`` counts as absent."""
    if value is None or isinstance(value, dict):
        return value
    if not value.strip():
        return None
    parsed = _parse(value, field)
    if parsed is not None and not isinstance(parsed, dict):
        raise ValidationError(f"{field} must be a JSON object, got {type(parsed).__name__}", field=field)
    return parsed


def json_value(value: Any, field: str) -> Any:
    """Any JSON value. A string that opens like an object or array must parse as one;
    any other string is kept as a plain string value (text payloads are legitimate)."""
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        return _parse(value, field)
    return value
