"""The stdio transport: the SDK's, plus an answer for every line it cannot read.

The SDK's stdio reader drops a line that is not a valid JSON-RPC message (not JSON, cut
short, a lone surrogate, a 5,000-digit number, nesting its parser refuses): the client
that sent it waits forever. Here every such line is answered as JSON-RPC 2.0 says: a parse
error (-32700) for text that is not JSON, an invalid-request error (-32600) for JSON that
is not a message we can serve; both carry the request's id when it can be read, else null.
Blank lines are ignored.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from io import TextIOWrapper
from typing import Any, cast

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from ..errors import MESSAGE_MAX_CHARS

__all__ = ["answer_for_unreadable", "answering_stdio_server"]

_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_STRUCTURE = re.compile(r'["{}\[\]]')
_WHITESPACE = re.compile(r"\s*")


def _scan_id(text: str) -> int | str | None:
    """The top-level ``"id"`` of a JSON object that may be cut short or nested too deep to parse."""
    depth, at = 0, 0
    while (match := _STRUCTURE.search(text, at)) is not None:
        at = match.start()
        char = text[at]
        if char == '"':
            string = _STRING.match(text, at)
            if string is None:
                return None
            at = string.end()
            if depth == 1 and string.group() == '"id"':
                colon = _WHITESPACE.match(text, at).end()  # type: ignore[union-attr]
                if text[colon : colon + 1] == ":":
                    return _as_id(_read_value(text, _WHITESPACE.match(text, colon + 1).end()))  # type: ignore[union-attr]
            continue
        depth += 1 if char in "{[" else -1
        at += 1
    return None


def _read_value(text: str, at: int) -> Any:
    try:
        return json.JSONDecoder().raw_decode(text, at)[0]
    except ValueError:
        return None


def _as_id(value: Any) -> int | str | None:
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None


def _loads(line: str) -> Any:
    # Huge integers parse (they are refused later, with the id known); depth is bounded by
    # the interpreter's recursion limit, past which the id is scanned for instead.
    return json.loads(line, parse_int=lambda digits: 0 if len(digits) > 4000 else int(digits))


def answer_for_unreadable(line: str, problem: Exception) -> types.JSONRPCError | None:
    """The error answer for a line the SDK refused; None for a notification (nothing to answer)."""
    try:
        message = _loads(line)
    except RecursionError:
        return _error(_scan_id(line), types.INVALID_REQUEST, "invalid request: the message is nested too deeply")
    except ValueError:
        return _error(_scan_id(line), types.PARSE_ERROR, "parse error: the line is not valid JSON")
    if isinstance(message, dict) and "id" not in message and isinstance(message.get("method"), str):
        return None  # a notification is never answered, not even when malformed
    request_id = _as_id(message.get("id")) if isinstance(message, dict) else None
    return _error(request_id, types.INVALID_REQUEST, f"invalid request: {_first_problem(problem)}")


def _id_dropped(message: Any, line: str) -> bool:
    """A request whose id is neither string nor number reads as a notification (no answer)."""
    if not isinstance(message, types.JSONRPCNotification) or '"id"' not in line:
        return False
    try:
        parsed = _loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(parsed, dict) and "id" in parsed


def _first_problem(problem: Exception) -> str:
    errors = getattr(problem, "errors", None)
    detail = str(problem)
    if callable(errors):
        try:
            detail = str(errors()[0].get("msg", detail))
        except (IndexError, TypeError, ValueError):
            pass
    return detail[:MESSAGE_MAX_CHARS]


def _error(request_id: int | str | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


async def _readable_lines(
    source: AsyncIterator[str], answers: MemoryObjectSendStream[SessionMessage]
) -> AsyncIterator[str]:
    async with answers:
        async for line in source:
            if not line.strip():
                continue
            try:
                message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except Exception as exc:  # noqa: BLE001 - whatever the SDK's reader would drop
                answer = answer_for_unreadable(line, exc)
            else:
                if not _id_dropped(message, line):
                    yield line
                    continue
                answer = _error(None, types.INVALID_REQUEST, "invalid request: id must be a string or a number")
            if answer is not None:
                await answers.send(SessionMessage(answer))


async def _forward(answers: MemoryObjectReceiveStream[SessionMessage],
                   write_stream: MemoryObjectSendStream[SessionMessage]) -> None:
    async with answers:
        async for answer in answers:
            await write_stream.send(answer)


def _claim_stdin() -> TextIOWrapper:
    """Read the wire from a private copy of fd 0 and point fd 0 at /dev/null, so nothing
    else in the process (a library, a child process) can take bytes off the wire."""
    private = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return TextIOWrapper(os.fdopen(private, "rb", closefd=True), encoding="utf-8", errors="replace")


@asynccontextmanager
async def answering_stdio_server() -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]
]:
    """``mcp.server.stdio.stdio_server`` whose stdin answers the lines the SDK cannot read."""
    source = anyio.wrap_file(_claim_stdin())
    answers_in, answers_out = anyio.create_memory_object_stream[SessionMessage](16)
    lines = _readable_lines(cast(AsyncIterator[str], source), answers_in)
    async with stdio_server(stdin=cast(Any, lines)) as (read_stream, write_stream), anyio.create_task_group() as tasks:
        tasks.start_soon(_forward, answers_out, write_stream)
        yield read_stream, write_stream
        tasks.cancel_scope.cancel()
