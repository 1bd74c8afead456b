"""Printing results: JSON for machines (--json), plain lines for people, progress on terminals.

Human output never shows raw JSON or Python reprs: nested values are flattened into
``key.sub: value`` lines, None reads ``-``, lists of plain values are comma-separated,
robotmem's own times (epoch seconds) read as UTC times.
"""

from __future__ import annotations

import codecs
import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

__all__ = ["TIME_KEYS", "emit", "format_bytes", "format_time", "format_value", "human_lines", "json_text",
           "progress_bar", "shown", "tolerate_narrow_encodings", "truncate", "writes_unicode"]

#: The time fields (epoch seconds) of robotmem's own records and sessions.
TIME_KEYS = frozenset({"created_at", "occurred_at", "updated_at", "reinforced_at", "forgotten_at", "first_seen",
                       "last_seen", "started_at", "ended_at"})

Renderer = Callable[[Any], Iterator[str]]


def emit(value: Any, as_json: bool, render: Renderer | None = None, out: TextIO | None = None) -> None:
    out = out if out is not None else sys.stdout
    if as_json:
        out.write(json_text(value, out) + "\n")
        return
    for line in (render or human_lines)(value):
        out.write(shown(line) + "\n")


def json_text(value: Any, out: TextIO, indent: int | None = 2) -> str:
    """``value`` as the --json text written to ``out`` (``indent`` None: one line, as an error
    object on stderr is written): lossless, and nothing in it a terminal would obey."""
    # strict JSON for any reader: a payload's NaN or inf is written as its summary writes it
    # (imported here: parsing a command line must not load numpy, which payload needs)
    from ..payload import tag_non_finite

    # \u escapes where the stream cannot hold every character (a latin-1 or ASCII locale):
    # the same JSON to any reader, never a UnicodeEncodeError half-way through the document.
    text = json.dumps(tag_non_finite(value), ensure_ascii=not writes_unicode(out), indent=indent, default=str,
                      allow_nan=False)
    # JSON escapes C0 itself; DEL and C1 (only ever inside strings) as \u escapes too, so a
    # terminal shows --json output rather than obeying it, and a reader decodes the same text
    return _JSON_UNESCAPED_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def writes_unicode(stream: TextIO) -> bool:
    """Whether ``stream`` encodes every character (UTF-8, UTF-16, ...), not a locale's 8-bit charset."""
    encoding = getattr(stream, "encoding", None)
    if not encoding:
        return True  # an in-memory stream (StringIO) holds text, not bytes
    try:
        return codecs.lookup(encoding).name.startswith("utf")
    except LookupError:
        return False


#: C0 and C1 control characters and DEL, but tab and newline (the layout of multi-line text).
#: A terminal obeys these rather than shows them: an ESC stored in a memory recoloured the
#: operator's terminal, and could move the cursor, retitle the window or set the clipboard; a
#: carriage return overwrote the line before it.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_JSON_UNESCAPED_CONTROLS = re.compile(r"[\x7f-\x9f]")


def shown(text: str) -> str:
    """``text`` for people's output: each control character written as its escape (``\\x1b``,
    as backslashreplace writes what a narrow locale cannot show). --json stays lossless: it
    writes them as ``\\u`` escapes its readers decode."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def tolerate_narrow_encodings(*streams: TextIO) -> None:
    """Text output on a terminal whose locale cannot show a character (Chinese memories under
    ISO-8859-1) writes it as a ``\\u`` escape instead of failing with UnicodeEncodeError."""
    for stream in streams:
        if not writes_unicode(stream) and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def format_value(value: Any) -> str:
    """One plain value for people: ``-`` for None, yes/no, numbers as they read, lists joined."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)) and all(not isinstance(v, (dict, list, tuple)) for v in value):
        return ", ".join(format_value(v) for v in value) if value else "-"
    return str(value)


def format_time(seconds: float | None, suffix: str = "") -> str:
    """Epoch seconds as a UTC time people read (``2026-12-05 11:19:37``, then ``suffix``); ``-`` for None."""
    if seconds is None:
        return "-"
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds)) + suffix
    except (OverflowError, OSError, ValueError):
        # A store written before times were held to 1970..9999 (validation.epoch_seconds) may
        # hold 1e300 or -1e20: shown as the number, never a crash of the whole listing.
        return f"{seconds:.6g} (epoch seconds, not a date)"


def human_lines(value: Any, prefix: str = "") -> Iterator[str]:
    """``key: value`` lines; nested mappings become dotted keys, lists of records numbered ones."""
    if isinstance(value, dict):
        if not value and prefix:
            yield f"{prefix}: -"
        for key, item in value.items():
            # Top level only: a memory's own times; keys inside its context are the user's to name.
            if not prefix and key in TIME_KEYS and isinstance(item, (int, float)) and not isinstance(item, bool):
                yield f"{key}: {format_time(item, ' UTC')}"
                continue
            yield from human_lines(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, (list, tuple)) and any(isinstance(v, (dict, list, tuple)) for v in value):
        for index, item in enumerate(value, 1):
            yield from human_lines(item, f"{prefix}[{index}]" if prefix else f"[{index}]")
    else:
        yield f"{prefix}: {format_value(value)}" if prefix else format_value(value)


def truncate(text: str, width: int) -> str:
    """One line of at most ``width`` characters (newlines folded, an ellipsis when cut)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: max(0, width - 1)] + "…"


def format_bytes(count: float) -> str:
    size = float(count)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"  # pragma: no cover - the loop always returns


def progress_bar(label: str, enabled: bool = True) -> Callable[[int, int], None] | None:
    """A ``progress(done, total)`` callback drawing a bar on stderr, or None.

    tqdm decides whether stderr is a terminal (``disable=None``): in logs and pipes, and with
    ``--no-progress``, nothing is drawn.
    """
    if not enabled:
        return None
    from tqdm import tqdm

    bar: dict[str, Any] = {}

    def show(done: int, total: int) -> None:
        if "tqdm" not in bar:
            bar["tqdm"] = tqdm(total=total, desc=label, unit="memory", file=sys.stderr, disable=None, leave=True)
        meter = bar["tqdm"]
        meter.update(done - meter.n)
        if done >= total:
            meter.close()

    return show
