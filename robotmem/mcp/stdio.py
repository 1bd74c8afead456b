"""The stdio transport: every line answered, bounded memory, and a prompt shutdown.

The SDK's stdio reader drops a line that is not a valid JSON-RPC message (not JSON, cut
short, a lone surrogate, a 5,000-digit number, nesting its parser refuses): the client
that sent it waits forever. Here every such line is answered as JSON-RPC 2.0 says: a parse
error (-32700) for text that is not JSON (or not UTF-8), an invalid-request error (-32600)
for JSON that is not a message we can serve; both carry the request's id when it can be
read, else null. Blank lines are ignored.

It also keeps the SDK from dropping calls at end of stdin: every request read is carried
out and answered before the server sees the end of its input (see ``_AnswerLedger``).

The wire itself is read and written here rather than by the SDK's ``stdio_server``:

* Its reads and writes run on anyio worker threads that cancellation cannot interrupt, so
  SIGTERM to an idle server (blocked reading stdin) or to one whose client stopped reading
  stdout waited for the client instead of ending. Here each blocking ``read``/``write``
  runs on a daemon thread the event loop abandons when cancelled (``_WireThread``).
* A line is read in bounded pieces and refused past ``max_line_bytes`` (the HTTP body cap)
  without being held whole; lines over ``LARGE_LINE_BYTES`` are parsed one at a time, and
  the heap is trimmed after each, as over HTTP (``body_gate``).
* Reading stops while ``MAX_UNANSWERED`` requests wait for their answer, so a client that
  writes without reading stdout fills its own pipe instead of the server's memory.
* A closed stdout ends the server with one log line (``StdioWire.stdout_closed``).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import SessionMessage
from mcp_types import RequestId
from typing_extensions import Self

from ..errors import MESSAGE_MAX_CHARS
from .body_gate import release_heap

__all__ = ["LARGE_LINE_BYTES", "MAX_UNANSWERED", "StdioWire", "answer_for_unreadable", "answering_stdio_server"]

log = logging.getLogger("robotmem.mcp")
T = TypeVar("T")

#: Requests read but not yet answered at which the server stops reading stdin. Tool calls
#: run side by side on worker threads (anyio's default limit is 40) and SQLite serialises
#: writes, so more in flight only queue up inside the server: 64 keeps every worker busy
#: with room to spare, and bounds what waits at 64 parsed requests (a few MB for typical
#: calls; large ones are bounded separately, one at a time). A client that pipelines more
#: simply finds its pipe full until answers go out.
MAX_UNANSWERED = 64
#: Lines over this are parsed one at a time, as HTTP bodies over ``LARGE_BODY_BYTES`` are.
LARGE_LINE_BYTES = 1024 * 1024
#: One read from stdin: a line longer than this is assembled from pieces (or discarded).
_READ_BYTES = 64 * 1024

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
    """A request whose id is neither a string nor an integer reads as a notification (no answer)."""
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

    The count of requests owed also paces the reader (``MAX_UNANSWERED``), and the ledger
    knows which of them came from a large line, so only one such is parsed at a time.
    """

    def __init__(self) -> None:
        self._owed: Counter[RequestId] = Counter()
        self._large: Counter[RequestId] = Counter()
        self._changed = anyio.Event()

    @property
    def unanswered(self) -> int:
        return self._owed.total()

    def read(self, message: types.JSONRPCMessage, *, large: bool = False) -> None:
        if isinstance(message, types.JSONRPCRequest):
            key = coerce_request_id(message.id)
            self._owed[key] += 1
            if large:
                self._large[key] += 1
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            cancelled = cancelled_request_id_from_params(message.params)
            if cancelled is not None:
                self._settle(cancelled)

    def written(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)) and message.id is not None:
            self._settle(message.id)

    def answers_large(self, message: types.JSONRPCMessage) -> bool:
        """Whether ``message`` answers a request that came from a large line."""
        return (isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)) and message.id is not None
                and self._large[coerce_request_id(message.id)] > 0)

    def _settle(self, request_id: RequestId) -> None:
        key = coerce_request_id(request_id)
        for owed in (self._owed, self._large):
            if owed[key] > 0:
                owed[key] -= 1
            if owed[key] <= 0:
                del owed[key]
        self._changed.set()

    async def _until(self, done: Callable[[], bool]) -> None:
        while not done():
            self._changed = anyio.Event()
            await self._changed.wait()

    async def all_answered(self) -> None:
        await self._until(lambda: not self._owed)

    async def room_for_more(self) -> None:
        await self._until(lambda: self.unanswered < MAX_UNANSWERED)

    async def no_large_in_flight(self) -> None:
        await self._until(lambda: not self._large)


class _LedgerWriteStream:
    """The server's write stream, telling the ledger which answers reached the stdout writer.

    The stdout writer takes one message at a time (a zero-size buffer), so a ``send`` that
    returned means the writer holds the answer; it writes it before the stream closes, and
    the transport waits for the writer before the process goes on to exit.
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


class _WireThread:
    """Runs blocking calls on the wire from one daemon thread, one at a time.

    anyio's worker threads cannot be interrupted and are joined when the process exits, so
    a ``read`` waiting for a client that keeps stdin open and silent (or a ``write`` to a
    client that stopped reading) held the server after SIGTERM until the client let go.
    Here a cancelled caller stops waiting at once; the thread stays blocked in its call
    (its result is dropped) and, being a daemon, does not keep the process alive.
    """

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            call()

    async def run(self, fn: Callable[[], T]) -> T:
        token = anyio.lowlevel.current_token()
        finished = anyio.Event()
        outcome: list[tuple[T | None, BaseException | None]] = []

        def call() -> None:
            try:
                outcome.append((fn(), None))
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task as it is
                outcome.append((None, exc))
            try:
                anyio.from_thread.run_sync(finished.set, token=token)
            except RuntimeError:
                pass  # the event loop has ended: nobody waits for this result any more

        self._calls.put(call)
        await finished.wait()
        result, error = outcome[0]
        if error is not None:
            raise error
        return result  # type: ignore[return-value]

    def stop(self) -> None:
        self._calls.put(None)


@dataclass
class _Line:
    """One line from stdin, without its newline; ``data`` is None when it was over the cap."""

    data: bytes | None
    size: int
    head: bytes  # the line's start (an over-long line's id is looked for there)


_HEAD_BYTES = 4096


class _LineReader:
    """Lines from a file descriptor, read in ``_READ_BYTES`` pieces; a line over ``cap``
    bytes is counted and discarded as it arrives, never held whole."""

    def __init__(self, fd: int, wire: _WireThread, cap: int) -> None:
        self._fd = fd
        self._wire = wire
        self._cap = cap
        self._rest = b""
        self._eof = False

    def _read(self) -> bytes:
        try:
            return os.read(self._fd, _READ_BYTES)
        except OSError as exc:  # a stdin that fails is one that ended
            log.warning("reading stdin failed (%s): treating it as the end of input", exc.strerror or exc)
            return b""

    async def next_line(self) -> _Line | None:
        """The next line; None at the end of input."""
        pieces: list[bytes] = []
        size, head = 0, b""
        while True:
            if not self._rest:
                if not self._eof:
                    self._rest = await self._wire.run(self._read)
                    self._eof = not self._rest
                if self._eof:
                    if size == 0:
                        return None
                    break  # a last line without its newline
            end = self._rest.find(b"\n")
            if end < 0:
                piece, self._rest = self._rest, b""
            else:
                piece, self._rest = self._rest[:end], self._rest[end + 1 :]
            if len(head) < _HEAD_BYTES:
                head += piece[: _HEAD_BYTES - len(head)]
            size += len(piece)
            if size <= self._cap:
                pieces.append(piece)
            else:
                pieces.clear()
            if end >= 0:
                break
        return _Line(b"".join(pieces) if size <= self._cap else None, size, head)


def _parse(line: _Line, cap: int) -> tuple[types.JSONRPCMessage | None, types.JSONRPCError | None]:
    """The message a line holds, or the error answer for it (both None: nothing to answer)."""
    if line.data is None:
        request_id = _scan_id(line.head.decode("utf-8", "replace"))
        return None, _error(request_id, types.INVALID_REQUEST,
                            f"invalid request: the line is {line.size} bytes; the limit is {cap} bytes "
                            "(3 x max_payload_bytes, as for an HTTP request body)")
    try:
        # Strict: replacing bad bytes would store U+FFFD in place of what the client sent.
        text = line.data.decode("utf-8")
    except UnicodeDecodeError:
        return None, _error(_scan_id(line.data.decode("utf-8", "replace")), types.PARSE_ERROR,
                            "parse error: the line is not valid UTF-8")
    if not text.strip():
        return None, None
    try:
        message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except Exception as exc:  # noqa: BLE001 - whatever the SDK's reader would drop
        return None, answer_for_unreadable(text, exc)
    if _id_dropped(message, text):
        return None, _error(None, types.INVALID_REQUEST, "invalid request: id must be a string or an integer")
    return message, None


async def _read_requests(
    lines: _LineReader,
    cap: int,
    to_server: MemoryObjectSendStream[SessionMessage | Exception],
    answers: MemoryObjectSendStream[SessionMessage],
    ledger: _AnswerLedger,
) -> None:
    async with to_server, answers:
        try:
            await _pass_on_lines(lines, cap, to_server, answers, ledger)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return  # the server stopped (a signal, a closed stdout) while a line was on its way
        # End of stdin: the server finishes every request it was given before it is told
        # there is no more input.
        await ledger.all_answered()


async def _pass_on_lines(
    lines: _LineReader,
    cap: int,
    to_server: MemoryObjectSendStream[SessionMessage | Exception],
    answers: MemoryObjectSendStream[SessionMessage],
    ledger: _AnswerLedger,
) -> None:
    while True:
        # Backpressure: a client that writes without reading our answers fills its own
        # pipe once this many wait, instead of the server's memory.
        await ledger.room_for_more()
        line = await lines.next_line()
        if line is None:
            return
        large = line.size > LARGE_LINE_BYTES and line.data is not None
        if large:  # one large request parsed at a time, as over HTTP
            await ledger.no_large_in_flight()
        message, answer = _parse(line, cap)
        del line  # not kept while the next line is awaited
        if message is not None:
            ledger.read(message, large=large)
            await to_server.send(SessionMessage(message))
            del message
        elif answer is not None:
            await answers.send(SessionMessage(answer))
            if large:  # a refused large line: its text and parsed objects are garbage now
                await anyio.to_thread.run_sync(release_heap)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


async def _write_answers(
    outgoing: MemoryObjectReceiveStream[SessionMessage], fd: int, wire: _WireThread, ledger: _AnswerLedger,
    on_closed: Callable[[OSError], None],
) -> None:
    closed = False
    async with outgoing:
        async for item in outgoing:
            if closed:
                continue  # nobody reads them: drained so the server's sends do not wait forever
            data = (item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode()
            large = ledger.answers_large(item.message)
            del item
            if large:
                # Its request's parsed objects are garbage once the handler returned: the
                # memory goes back before the client hears, so an idle server holds none of it.
                await anyio.to_thread.run_sync(release_heap)
            try:
                await wire.run(lambda: _write_all(fd, data))
            except OSError as exc:
                closed = True
                on_closed(exc)


@dataclass
class StdioWire:
    """The streams the server runs on; ``stop`` is set by the server to end its run."""

    read_stream: MemoryObjectReceiveStream[SessionMessage | Exception]
    write_stream: _LedgerWriteStream
    stop: Callable[[], None] = field(default=lambda: None)
    #: The client closed our stdout (or writing to it failed): the server stopped for that.
    stdout_closed: bool = False


def _claim(fd: int, diversion: int) -> tuple[int, Callable[[], None]]:
    """Serve the wire from a private copy of ``fd`` and point ``fd`` at ``diversion``, so
    nothing else in the process (a library, a child process) can read from or write to the
    wire. The private copy is never closed: an abandoned thread may still block on it."""
    private = os.dup(fd)
    # Reads and writes block on their own thread; a descriptor a client handed over in
    # non-blocking mode would make them fail at once (EAGAIN) instead.
    os.set_blocking(private, True)
    os.dup2(diversion, fd)
    os.close(diversion)

    def restore() -> None:
        os.dup2(private, fd)

    return private, restore


@asynccontextmanager
async def answering_stdio_server(max_line_bytes: int) -> AsyncIterator[StdioWire]:
    """The server's streams over stdin and stdout: every line answered, requests paced by
    their answers, and stdin's end held back until every request read has been answered."""
    stdin_fd, restore_stdin = _claim(0, os.open(os.devnull, os.O_RDONLY))
    stdout_fd, restore_stdout = _claim(1, os.dup(2))  # stray prints go to the log
    to_server, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    answers, outgoing = anyio.create_memory_object_stream[SessionMessage](0)
    ledger = _AnswerLedger()
    wire = StdioWire(read_stream, _LedgerWriteStream(answers.clone(), ledger))
    reading, writing = _WireThread("robotmem stdin"), _WireThread("robotmem stdout")

    def stdout_closed(exc: OSError) -> None:
        log.warning("stdout was closed by the client (%s): shutting down", exc.strerror or exc)
        wire.stdout_closed = True
        wire.stop()

    reader = anyio.CancelScope()

    async def read() -> None:
        with reader:
            await _read_requests(_LineReader(stdin_fd, reading, max_line_bytes), max_line_bytes,
                                 to_server, answers, ledger)

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read)
            tasks.start_soon(_write_answers, outgoing, stdout_fd, writing, ledger, stdout_closed)
            try:
                yield wire
            finally:
                # The server is done: no more reading; the writer ends once it has written
                # every answer handed to it.
                reader.cancel()
                await wire.write_stream.aclose()
    finally:
        reading.stop()
        writing.stop()
        restore_stdin()
        if not wire.stdout_closed:
            restore_stdout()
