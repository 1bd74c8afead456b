"""Compact storage of perception payloads.

Numeric arrays (trajectories, force profiles, joint samples) are stored as raw numpy
bytes inside msgpack instead of JSON text: a 1,000 x 7 float64 joint log is 56 KB
here and about 130 KB as JSON, and decodes without parsing numbers.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np

from .errors import ValidationError
from .models import JSON_MAX_DEPTH
from .validation import too_deep

__all__ = ["check_stored_payload", "decode_payload", "encode_payload", "summarize_payload", "summary_from_json", "tag_non_finite", "to_json_safe"]

_NDARRAY_EXT = 1
#: The dtype kinds an array of a payload may have (bool, signed, unsigned, float): the others
#: (complex, datetime, text, void) have no JSON form for get_data.
_ARRAY_KINDS = "biuf"
_MAX_SUMMARY_KEYS = 20


def _as_array(value: list[Any]) -> np.ndarray | None:
    """A list of numbers (or a rectangular nest of them) as an array; None if it is not one."""
    if not value:
        return None
    first = value[0]
    if isinstance(first, list):
        width = len(first)
        if width == 0 or not all(isinstance(row, list) and len(row) == width for row in value):
            return None
        flat = [x for row in value for x in row]
        if not _all_numbers(flat):
            return None
        array = np.asarray(value)
    elif _all_numbers(value):
        array = np.asarray(value)
    else:
        return None
    if array.dtype.kind == "f" and not _floats_are_exact(value):
        return None  # a huge integer among floats would lose digits as float64: keep the list
    return array if array.dtype.kind in "if" else None


def _floats_are_exact(items: list[Any]) -> bool:
    """Integers mixed with floats convert to float64 without changing value (|i| <= 2**53)."""
    flat = [x for row in items for x in row] if items and isinstance(items[0], list) else items
    return all(not isinstance(x, int) or abs(x) <= 2**53 for x in flat)


def _all_numbers(items: list[Any]) -> bool:
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in items)


def _prepare(value: Any, depth: int = 0) -> Any:
    # Depth is checked here, on the value itself: a Python caller, or the MCP SDK (which parses
    # a JSON string argument before robotmem sees it), can hand over nesting that JSON text
    # would have been refused for, and deeper nesting would exhaust Python's recursion limit.
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (dict, list, tuple)) and depth >= JSON_MAX_DEPTH:
        raise _TooDeep
    if isinstance(value, dict):
        return {str(k): _prepare(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        array = _as_array(list(value))
        return array if array is not None else [_prepare(v, depth + 1) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


class _TooDeep(Exception):
    pass


def _default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in _ARRAY_KINDS:
            raise TypeError(f"arrays of dtype {obj.dtype} cannot be stored")
        array = np.ascontiguousarray(obj)
        header = msgpack.packb([array.dtype.str, list(array.shape)])
        return msgpack.ExtType(_NDARRAY_EXT, header + array.tobytes())
    if isinstance(obj, int):
        raise TypeError(f"integer {obj} is outside the 64-bit range")
    raise TypeError(f"{type(obj).__name__} is not storable")


#: The dtypes of arrays read, by their name as a header spells it (the few encode_payload stores).
_DTYPES: dict[bytes, np.dtype[Any]] = {}


def _short_header(data: bytes) -> tuple[np.dtype[Any], tuple[int, ...], int] | None:
    """An array's ``[dtype, shape]`` header in the form msgpack writes it for a dtype name under 32
    characters and at most 15 dimensions of under 128 each (a fixarray of a fixstr and a fixarray
    of positive fixints): dtype, shape and where the values start, read without an Unpacker (whose
    making and reading were half of decoding a pose chunk: 100,000 chunks, 300,000 arrays a page).
    None for any other form, which the Unpacker reads."""
    if len(data) < 3 or data[0] != 0x92 or not 0xA0 <= data[1] <= 0xBF:
        return None
    end = 2 + (data[1] & 0x1F)
    if end >= len(data) or not 0x90 <= data[end] <= 0x9F:
        return None
    dims = data[end + 1:end + 1 + (data[end] & 0x0F)]
    if len(dims) != data[end] & 0x0F or any(d >= 0x80 for d in dims):
        return None
    name = data[2:end]
    dtype = _DTYPES.get(name)
    if dtype is None:
        dtype = np.dtype(name.decode())
        if len(_DTYPES) < 64:
            _DTYPES[name] = dtype
    return dtype, tuple(dims), end + 1 + len(dims)


def _ext_hook(code: int, data: bytes) -> Any:
    if code != _NDARRAY_EXT:
        return msgpack.ExtType(code, data)
    header = _short_header(data)
    if header is None:
        unpacker = msgpack.Unpacker(raw=False)
        unpacker.feed(data)
        name, dims = unpacker.unpack()
        header = np.dtype(name), dims, unpacker.tell()
    dtype, shape, offset = header
    array = np.frombuffer(data, dtype=dtype, offset=offset)
    return array if array.shape == shape else array.reshape(shape)


def encode_payload(data: Any, *, max_bytes: int, field: str = "data") -> bytes:
    """msgpack bytes of ``data``; numeric lists become typed arrays. Enforces the size limit."""
    try:
        blob: bytes = msgpack.packb(_prepare(data), default=_default, use_bin_type=True)
    except _TooDeep:
        raise too_deep(field, JSON_MAX_DEPTH) from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValidationError(f"{field} cannot be stored: {exc}", field=field) from exc
    if len(blob) > max_bytes:
        raise ValidationError(
            f"{field} is {len(blob)} bytes encoded; the limit is {max_bytes} bytes "
            "(config max_payload_bytes)",
            field=field,
        )
    return blob


def decode_payload(blob: bytes) -> Any:
    """The stored value with arrays as read-only numpy arrays."""
    return msgpack.unpackb(blob, ext_hook=_ext_hook, raw=False, strict_map_key=False)


def check_stored_payload(value: Any, field: str) -> None:
    """Refuse a decoded payload that encode_payload could not have written, naming ``field``.

    msgpack read from a file (an import) may hold what a perception's data never does: a key that
    is not text (a bytes key failed summarize_payload's JSON), an ext type other than robotmem's
    arrays (msgpack's timestamps, unknown codes: not JSON), an array of a dtype encode_payload
    refuses, nesting deeper than JSON_MAX_DEPTH. The walk stops at that depth."""
    pending: list[tuple[Any, str, int]] = [(value, field, 0)]
    while pending:
        item, where, depth = pending.pop()
        if isinstance(item, dict):
            if depth >= JSON_MAX_DEPTH:
                raise too_deep(field, JSON_MAX_DEPTH)
            for key, child in item.items():
                if not isinstance(key, str):
                    raise ValidationError(f"{where} has a key of type {type(key).__name__}; a payload's keys "
                                          "are text", field=field)
                pending.append((child, f"{where}.{key}", depth + 1))
        elif isinstance(item, list):
            if depth >= JSON_MAX_DEPTH:
                raise too_deep(field, JSON_MAX_DEPTH)
            pending.extend((child, f"{where}[{i}]", depth + 1) for i, child in enumerate(item))
        elif isinstance(item, np.ndarray):
            if item.dtype.kind not in _ARRAY_KINDS:
                raise ValidationError(f"{where} is an array of dtype {item.dtype}, which a payload cannot hold",
                                      field=field)
        elif item is not None and not isinstance(item, (str, bytes, bool, int, float)):
            raise ValidationError(f"{where} holds a value of type {type(item).__name__} (a msgpack "
                                  "extension robotmem does not write), which a payload cannot", field=field)


def to_json_safe(value: Any) -> Any:
    """Arrays to lists, bytes to {"base64": ...}: what get_data returns over JSON."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii"), "bytes": len(value)}
    if isinstance(value, dict):
        return {k: to_json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_json_safe(v) for v in value]
    return value


def tag_non_finite(value: Any) -> Any:
    """``value`` with each NaN or infinite float written ``{"float": "nan" | "inf" | "-inf"}``, the
    form payload summaries use: what a strict JSON output (the CLI's ``--json``) prints of a
    payload's data, which keeps a laser's inf and a sensor's NaN."""
    return replace_non_finite(value, _non_finite)


def replace_non_finite(value: Any, replacement: Callable[[float], Any]) -> Any:
    """``value`` (nested dicts, lists, tuples as lists) with each NaN or infinite float replaced by
    ``replacement(it)``: JSON has no such numbers."""
    if isinstance(value, float):
        return value if math.isfinite(value) else replacement(value)
    if isinstance(value, dict):
        return {k: replace_non_finite(v, replacement) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [replace_non_finite(v, replacement) for v in value]
    return value


def summarize_payload(value: Any, nbytes: int) -> dict[str, Any]:
    """What recall shows instead of the payload: its shape, not its bulk. Strict JSON: a scalar
    that is NaN or infinite (a laser's inf, a sensor's NaN; the payload keeps it) is shown as
    ``{"float": "nan" | "inf" | "-inf"}``."""
    return {"bytes": nbytes, "shape": _describe(value, depth=0)}


def _non_finite(value: float) -> dict[str, str]:
    return {"float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}


_JSON_CONSTANTS = {"NaN": _non_finite(math.nan), "Infinity": _non_finite(math.inf),
                   "-Infinity": _non_finite(-math.inf)}


# One decoder for every summary: json.loads with parse_constant builds a new one each call, more
# than half the cost of a small summary (2.8 us instead of 1.2; an episode page reads 20,000).
_SUMMARY = json.JSONDecoder(parse_constant=lambda name: dict(_JSON_CONSTANTS[name]))


def summary_from_json(text: str) -> Any:
    """A stored summary, read. Summaries stored before they were kept strict hold ``NaN`` and
    ``Infinity`` tokens (Python's json wrote them): read as the tagged form summarize_payload
    writes now, so a hit and an export are strict JSON whatever wrote the store."""
    return _SUMMARY.decode(text)


def _describe(value: Any, depth: int) -> Any:
    if isinstance(value, np.ndarray):
        return {"array": list(value.shape), "dtype": str(value.dtype)}
    if isinstance(value, (bytes, bytearray)):
        return {"binary": len(value)}
    if isinstance(value, dict):
        if depth >= 2:
            return {"object": len(value)}
        keys = list(value)[:_MAX_SUMMARY_KEYS]
        described = {k: _describe(value[k], depth + 1) for k in keys}
        if len(value) > len(keys):
            described["..."] = f"{len(value) - len(keys)} more keys"
        return described
    if isinstance(value, list):
        return {"list": len(value)}
    if isinstance(value, str):
        return value if len(value) <= 80 else {"text": len(value)}
    if isinstance(value, float) and not math.isfinite(value):
        return _non_finite(value)  # the value itself is not JSON (json.dumps would write NaN / Infinity)
    return value
