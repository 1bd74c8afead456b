"""The stdio transport: the SDK's, plus an answer for every line it cannot read.

The SDK's stdio reader drops a line that is not a valid JSON-RPC message (not JSON, cut
short, a lone surrogate, a 5,000-digit number, nesting its parser refuses): the client
that sent it waits forever. Here every such line is answered as JSON-RPC 2.0 says: a parse
error (-32700) for text that is not JSON, an invalid-request error (-32600) for JSON that
is not a message we can serve; both carry the request's id when it can be read, else null.
Blank lines are ignored.

It also keeps the SDK from dropping calls at end of stdin: every request read is carried
out and answered before the server sees the end of its input (see ``_AnswerLedger``).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from io import TextIOWrapper
from typing import Any, cast

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import SessionMessage
from mcp_types import RequestId
from typing_extensions import Self

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


class _AnswerLedger:
    """The requests read from stdin that are still owed an answer on stdout.

    Why this exists: the SDK's ``JSONRPCDispatcher.run`` treats the end of its read stream
    as the end of the connection and cancels every handler still running. A tool call in
    flight when the client closes stdin then either gets -32000 "Connection closed" without
    being carried out, or (when the store write had already committed on its worker thread
    and the answer was being written) no answer at all. stdin closing only means the client
    has nothing more to *send*; it still reads stdout. So the stdin reader holds back the
    end of input until every request it passed on has been answered, and only then lets the
    dispatcher see it. The SDK's dispatcher, session and stdio writer run unchanged.

    A request the client cancels (``notifications/cancelled``) is never answered (JSON-RPC
    and the MCP spec forbid it), so it is owed nothing. robotmem's tools never send requests
    to the client, so no handler waits for a reply that a closed stdin cannot bring.
    """

    def __init__(self) -> None:
        self._owed: Counter[RequestId] = Counter()
        self._changed = anyio.Event()

    def read(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCRequest):
            self._owed[coerce_request_id(message.id)] += 1
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            cancelled = cancelled_request_id_from_params(message.params)
            if cancelled is not None:
                self._settle(cancelled)

    def written(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)) and message.id is not None:
            self._settle(message.id)

    def _settle(self, request_id: RequestId) -> None:
        key = coerce_request_id(request_id)
        if self._owed[key] > 0:
            self._owed[key] -= 1
        if self._owed[key] <= 0:
            del self._owed[key]
        self._changed.set()

    async def all_answered(self) -> None:
        while self._owed:
            self._changed = anyio.Event()
            await self._changed.wait()


class _LedgerWriteStream:
    """The server's write stream, telling the ledger which answers reached the stdout writer.

    The stdout writer takes one message at a time (a zero-size buffer), so a ``send`` that
    returned means the writer holds the answer; it writes and flushes it before the stream
    closes, and the stdio transport waits for the writer before the process goes on to exit.
    """

    def __init__(self, inner: MemoryObjectSendStream[SessionMessage], ledger: _AnswerLedger) -> None:
        self._inner = inner
        self._ledger = ledger

    async def send(self, item: SessionMessage, /) -> None:
        await self._inner.send(item)
        self._ledger.written(item.message)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


async def _readable_lines(
    source: AsyncIterator[str],
    answers: MemoryObjectSendStream[SessionMessage],
    forwarded: anyio.Event,
    ledger: _AnswerLedger,
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
                    ledger.read(message)
                    yield line
                    continue
                answer = _error(None, types.INVALID_REQUEST, "invalid request: id must be a string or a number")
            if answer is not None:
                await answers.send(SessionMessage(answer))
    # End of stdin. The answers to unreadable lines go out first (the stream they share with
    # the server's answers closes once the server sees the end), then the server finishes
    # every request it was given before it is told there is no more input.
    await forwarded.wait()
    await ledger.all_answered()


async def _forward(answers: MemoryObjectReceiveStream[SessionMessage],
                   write_stream: MemoryObjectSendStream[SessionMessage], forwarded: anyio.Event) -> None:
    try:
        async with answers:
            async for answer in answers:
                await write_stream.send(answer)
    finally:
        forwarded.set()


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
    tuple[MemoryObjectReceiveStream[SessionMessage | Exception], _LedgerWriteStream]
]:
    """``mcp.server.stdio.stdio_server`` whose stdin answers the lines the SDK cannot read
    and ends only once every request read from it has been answered."""
    source = anyio.wrap_file(_claim_stdin())
    answers_in, answers_out = anyio.create_memory_object_stream[SessionMessage](16)
    forwarded, ledger = anyio.Event(), _AnswerLedger()
    lines = _readable_lines(cast(AsyncIterator[str], source), answers_in, forwarded, ledger)
    async with stdio_server(stdin=cast(Any, lines)) as (read_stream, write_stream), anyio.create_task_group() as tasks:
        tasks.start_soon(_forward, answers_out, write_stream, forwarded)
        yield read_stream, _LedgerWriteStream(write_stream, ledger)
        tasks.cancel_scope.cancel()
