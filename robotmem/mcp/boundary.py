"""The error boundary: every tool outcome becomes a ``CallToolResult``, never an exception.

A client always gets one of two shapes back:

* success: ``structuredContent`` is the ``Memory`` result, and the same JSON is the text
  content for clients that predate structured output;
* failure: ``isError`` is true and ``structuredContent`` is
  ``{"error": {"code", "field", "message"}}`` (again mirrored as text).

Storage failures and crashes are logged here with their cause; the client sees a message
that names no internals (no paths, SQL or tracebacks). A storage failure is logged as one
line, a crash with its traceback.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from mcp_types import CallToolResult, TextContent
from pydantic import ValidationError as PydanticValidationError

from ..errors import RobotMemError, StorageError

__all__ = [
    "STORAGE_MESSAGE",
    "error_result",
    "forget_traceback",
    "log_storage_failure",
    "ok_result",
    "result_for_argument_errors",
    "result_for_exception",
]

log = logging.getLogger("robotmem.mcp")

STORAGE_MESSAGE = "the memory store could not complete the request; the server log has the details"


def _as_text(payload: Mapping[str, Any]) -> str:
    # default=str keeps an odd value (a Path, a numpy scalar) from turning a success into a crash.
    return json.dumps(payload, ensure_ascii=False, default=str)


def ok_result(payload: Mapping[str, Any]) -> CallToolResult:
    data = dict(payload)
    return CallToolResult(content=[TextContent(type="text", text=_as_text(data))], structured_content=data)


def error_result(code: str, message: str, field: str | None = None) -> CallToolResult:
    data = {"error": {"code": code, "field": field, "message": message}}
    return CallToolResult(
        content=[TextContent(type="text", text=_as_text(data))], structured_content=data, is_error=True
    )


def log_storage_failure(what: str, exc: StorageError) -> None:
    """One line with the cause, no traceback: a StorageError is an expected, explained failure
    (its message says what happened and what to do), and during an outage every call fails
    alike; a traceback each (273 for 136 calls in one outage) buried the log. Only a crash
    (``internal_error``) needs its traceback."""
    log.error("%s: storage failure: %s", what, exc.message)


def forget_traceback(exc: BaseException) -> None:
    """Drop the tracebacks of ``exc`` and of its causes once it has been answered and logged.

    A traceback holds the frames it passed through, and so their locals: the call's
    arguments. The exception is itself held by a frame on that traceback (anyio's worker
    thread hands it over through one), so exception, traceback and frames form a cycle
    that only the cyclic collector frees, at some later full collection. Measured: three
    refused 45 MiB save_perception calls kept ~550 MB alive after they were answered.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    pending: list[BaseException] = []
    while current is not None:
        if id(current) not in seen:
            seen.add(id(current))
            current.__traceback__ = None
            pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        current = pending.pop() if pending else None


def result_for_exception(tool: str, exc: BaseException) -> CallToolResult:
    """Translate anything a tool body raised into the wire error shape (``exc`` is consumed:
    its traceback is dropped once logged)."""
    try:
        return _result_for_exception(tool, exc)
    finally:
        forget_traceback(exc)


def _result_for_exception(tool: str, exc: BaseException) -> CallToolResult:
    if isinstance(exc, StorageError):
        log_storage_failure(f"tool {tool}", exc)
        # The advice (disk full, read-only, I/O error and what to do) names no paths or SQL.
        message = STORAGE_MESSAGE if exc.advice is None else f"the memory store could not complete the request: {exc.advice}"
        return error_result(StorageError.code, message)
    if isinstance(exc, RobotMemError):
        log.info("tool %s rejected: %s (field=%s)", tool, exc.message, exc.field)
        return error_result(exc.code, exc.message, exc.field)
    log.error("tool %s: unexpected error", tool, exc_info=exc)
    return error_result("internal_error", f"{tool} failed unexpectedly; the server log has the details")


def result_for_argument_errors(tool: str, exc: PydanticValidationError) -> CallToolResult:
    """Arguments that failed the tool's input schema (wrong type, missing) as a ``validation_error``.

    The first offending parameter becomes ``field``; the message lists every problem so a
    client can fix all of them in one retry. ``exc`` is consumed (see ``forget_traceback``).
    """
    try:
        return _result_for_argument_errors(tool, exc)
    finally:
        forget_traceback(exc)


def _result_for_argument_errors(tool: str, exc: PydanticValidationError) -> CallToolResult:
    problems: list[tuple[str, str]] = []
    for err in exc.errors():
        loc = err.get("loc") or ()
        # loc[0] is the parameter; deeper parts are pydantic's union-branch tags, not paths.
        field = str(loc[0]) if loc else "arguments"
        if err.get("type") == "missing":
            text = "is required"
        else:
            # Name the type that arrived: "expected an integer" alone hides that "5" was a string.
            text = f"{err.get('msg', 'is invalid')}, got {type(err.get('input')).__name__}"
        if (field, text) not in problems:
            problems.append((field, text))
    if not problems:
        problems.append(("arguments", "are invalid"))
    log.info("tool %s: arguments rejected for %s", tool, sorted({f for f, _ in problems}))
    message = "; ".join(f"{field}: {text}" for field, text in problems)
    return error_result("validation_error", message, problems[0][0])
