"""A cheap estimate of how much memory a message or record holds, for byte-bounded queues.

Why an estimate and not ``sys.getsizeof`` of everything or a re-serialisation: the live
bridge sizes each message on roslibpy's thread, which must never fall behind the websocket.
What makes a message big is a few long fields: an image's or point cloud's base64 ``data``
string (4 MiB of pixels is a 5.6 MB str), a scan's ``ranges`` list, a record's thumbnail
bytes. Those are measured exactly (a str's or bytes' length; a list of numbers as its length
times a float's cost, without visiting the numbers); only containers are walked, so the cost
is proportional to the number of dicts and lists, far below the JSON parse that built them.
Per-object overheads are CPython's on 64-bit (a float object and its list slot, 32 bytes;
a str's header, 49), so the estimate is within tens of percent for small messages and within
a few percent for the large ones a bound is for. Small messages are bounded by count anyway.
"""

from __future__ import annotations

from typing import Any

__all__ = ["approx_bytes"]

#: a float or int object (24-28 bytes) plus its slot in the list (8)
_NUMBER = 32
#: str and bytes object headers (CPython, compact ASCII str)
_STR = 49
_BYTES = 33
#: a dict or list object, plus 8 bytes a slot (dicts keep keys and values: counted per item)
_CONTAINER = 64
_SLOT = 8


def approx_bytes(value: Any) -> int:
    """Roughly the bytes ``value`` holds (see the module docstring for why this is good enough)."""
    if isinstance(value, str):
        return _STR + len(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _BYTES + len(value)
    if isinstance(value, dict):
        return _CONTAINER + sum(_SLOT * 3 + approx_bytes(k) + approx_bytes(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return _CONTAINER + _list_items(value)
    nbytes = getattr(value, "nbytes", None)  # numpy arrays
    if isinstance(nbytes, int):
        return _CONTAINER + nbytes
    return _NUMBER


def _list_items(items: list[Any] | tuple[Any, ...]) -> int:
    """A list of numbers (ranges, positions, a JSON-encoded byte array) costs its length times a
    number's, read off its first item without visiting the rest; other lists are walked."""
    if not items:
        return 0
    if isinstance(items[0], (int, float)):
        return len(items) * _NUMBER
    return sum(_SLOT + approx_bytes(item) for item in items)
