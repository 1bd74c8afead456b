"""Boundary checks. Each raises ValidationError naming the offending field."""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timezone
from typing import Any

from .errors import ValidationError, brief
from .models import (
    COLLECTION_MAX_CHARS,
    DESCRIPTION_MAX_CHARS,
    DESCRIPTION_MIN_CHARS,
    INSIGHT_MAX_CHARS,
    PERCEPTION_TYPES,
    REASON_MAX_CHARS,
    RECALL_MAX_N,
)

_COLLECTION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]*$")
_SESSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")


def text(value: Any, field: str, *, min_len: int = 1, max_len: int) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{field} must be a string, got {type(value).__name__}", field=field)
    stripped = value.strip()
    if len(stripped) < min_len:
        what = "must not be empty" if min_len == 1 else f"must be at least {min_len} characters"
        raise ValidationError(f"{field} {what}", field=field)
    if len(stripped) > max_len:
        raise ValidationError(
            f"{field} is {len(stripped)} characters; the limit is {max_len}", field=field
        )
    return stripped


def insight(value: Any, field: str = "insight") -> str:
    return text(value, field, max_len=INSIGHT_MAX_CHARS)


def description(value: Any, field: str = "description") -> str:
    return text(value, field, min_len=DESCRIPTION_MIN_CHARS, max_len=DESCRIPTION_MAX_CHARS)


def reason(value: Any) -> str:
    return text(value, "reason", max_len=REASON_MAX_CHARS)


def integer(value: Any, field: str, *, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{field} must be an integer, got {type(value).__name__}", field=field)
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ValidationError(f"{field} must be {bound}, got {value}", field=field)
    return value


def memory_id(value: Any, field: str = "memory_id") -> int:
    return integer(value, field, low=1)


def recall_n(value: Any) -> int:
    return integer(value, "n", low=1, high=RECALL_MAX_N)


def unit_interval(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{field} must be a number, got {type(value).__name__}", field=field)
    number = float(value)
    if math.isnan(number) or not 0.0 <= number <= 1.0:
        raise ValidationError(f"{field} must be between 0 and 1, got {value}", field=field)
    return number


def optional_score(value: Any, field: str = "outcome_score") -> float | None:
    return None if value is None else unit_interval(value, field)


def perception_type(value: Any) -> str:
    if value not in PERCEPTION_TYPES:
        raise ValidationError(
            f"perception_type must be one of {', '.join(PERCEPTION_TYPES)}; got {brief(value)}",
            field="perception_type",
        )
    return str(value)


def collection(value: Any, default: str) -> str:
    if value is None:
        return default
    if not isinstance(value, str) or not _COLLECTION_RE.match(value) or len(value) > COLLECTION_MAX_CHARS:
        raise ValidationError(
            "collection must be 1-64 characters of letters, digits, '_', '-', '.', ':' "
            f"starting with a letter or digit; got {brief(value)}",
            field="collection",
        )
    return value


def session_id(value: Any, field: str = "session_id") -> str:
    if not isinstance(value, str) or not _SESSION_RE.match(value):
        raise ValidationError(
            f"{field} must be a session id such as 'ses_1a2b3c4d5e6f'; got {brief(value)}", field=field
        )
    return value


def json_object(value: Any, field: str, *, allow_none: bool = True) -> dict[str, Any] | None:
    """Accept a dict or a string holding a JSON object (MCP clients send both)."""
    if value is None or (isinstance(value, str) and value.strip() == ""):
        if allow_none:
            return None
        raise ValidationError(f"{field} is required", field=field)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ValidationError(f"{field} is not valid JSON: {exc}", field=field) from exc
    if not isinstance(value, dict):
        raise ValidationError(f"{field} must be a JSON object, got {type(value).__name__}", field=field)
    return value


def json_value(value: Any, field: str) -> Any:
    """A JSON value; a string that parses as a JSON array/object is parsed (clients double-encode)."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                return json.loads(stripped)
            except ValueError as exc:
                raise ValidationError(f"{field} is not valid JSON: {exc}", field=field) from exc
    return value


def timestamp(value: Any, field: str) -> float | None:
    """Epoch seconds (int/float) or ISO 8601 text (naive means UTC)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValidationError(f"{field} must be epoch seconds or ISO 8601 text", field=field)
    if isinstance(value, (int, float)):
        if math.isnan(value) or math.isinf(value):
            raise ValidationError(f"{field} must be a finite time", field=field)
        return float(value)
    if isinstance(value, str):
        raw = value.strip()
        try:
            number = float(raw)
        except ValueError:
            pass
        else:
            if not math.isfinite(number):
                raise ValidationError(f"{field} must be a finite time", field=field)
            return number
        try:
            parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValidationError(
                f"{field} must be epoch seconds or ISO 8601 (2026-12-01T08:00:00Z); got {brief(value)}",
                field=field,
            ) from exc
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        return parsed.timestamp()
    raise ValidationError(f"{field} must be epoch seconds or ISO 8601 text", field=field)
