"""Hostile input over stdio: every request gets an answer, and the server keeps serving.

Two ways in: hypothesis-made tool arguments through the SDK's own stdio client, and
hypothesis-made raw lines (broken JSON, cut-off requests, odd values) written straight to
the server's stdin. One server per module; each example ends with a good call that must
still succeed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client.session import ClientSession

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "robotmem" / "mcp"))
from mcp_client_helpers import stdio_session
from raw_stdio import RawServer

from robotmem.errors import MESSAGE_MAX_CHARS

TOOLS = {
    "learn": ["insight", "context", "collection", "session_id"],
    "recall": ["query", "n", "min_confidence", "session_id", "context_filter", "spatial_sort", "since", "until"],
    "save_perception": ["description", "perception_type", "data", "metadata", "collection", "session_id"],
    "forget": ["memory_id", "reason"],
    "update": ["memory_id", "new_content", "context"],
    "start_session": ["collection", "context"],
    "end_session": ["session_id", "outcome_score"],
}
#: Generous bound for one answer (a hang fails instead of blocking CI); not a speed assertion.
ANSWER_TIMEOUT_S = 60.0
EXPECTED_CODES = {"validation_error", "not_found", "conflict"}

text = st.one_of(st.text(max_size=30), st.sampled_from(["", " ", "ses_1a2b3c4d5e6f", "{", "[1,", "$or", "a\"]",
                                                        "x" * 400, "2026-12-01T08:00:00Z", "nan", "🤖"]))
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), text,
                    st.integers(min_value=2**63, max_value=2**80))
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(text, inner, max_size=4)), max_leaves=12)


@st.composite
def tool_calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    tool = draw(st.sampled_from(sorted(TOOLS)))
    names = draw(st.lists(st.sampled_from(TOOLS[tool] + ["limit", "bogus"]), max_size=4, unique=True))
    return tool, {name: draw(json_values) for name in names}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ClientSession]:
    home = tmp_path_factory.mktemp("stdio-hostile")
    async with stdio_session(home, home / "server.log", ROBOTMEM_EMBEDDINGS="off") as session:
        yield session


@pytest.mark.anyio
async def test_hostile_tool_arguments_through_the_sdk_client_are_answered(client: ClientSession) -> None:
    calls = []

    @settings(max_examples=120, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(tool_calls())
    def collect(call: tuple[str, dict[str, Any]]) -> None:
        calls.append(call)

    collect()  # hypothesis draws the calls; the async client then makes each one
    for tool, arguments in calls:
        with anyio.fail_after(ANSWER_TIMEOUT_S):
            result = await client.call_tool(tool, arguments)
        payload = result.structured_content or {}
        if result.is_error:
            error = payload["error"]
            assert error["code"] in EXPECTED_CODES, (tool, arguments, error)
            assert len(error["message"]) <= MESSAGE_MAX_CHARS + 60
    with anyio.fail_after(ANSWER_TIMEOUT_S):
        still = await client.call_tool("learn", {"insight": "the server still answers"})
    assert not still.is_error


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawServer]:
    server = RawServer(tmp_path_factory.mktemp("stdio-raw"))
    yield server
    server.close()


def _deep(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


TEMPLATE = ('{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"learn",'
            '"arguments":{"insight":%s,"context":%s}}}')
KNOWN_BAD = [
    b"hello",
    b'{"jsonrpc":"2.0","id":5,"method":"tools/ca',
    (TEMPLATE % ("6", '"\\ud800"', "{}")).encode(),
    (TEMPLATE % ("7", '"x"', '{"a":' + "9" * 5000 + "}")).encode(),
    (TEMPLATE % ("8", '"x"', _deep(197))).encode(),
    (TEMPLATE % ("9", '"x"', _deep(10_000))).encode(),
    (TEMPLATE % ('"s"', '"x"', '{"a":1e999}')).encode(),
    b"[1, 2, 3]",
    b'{"id": 11, "method": "ping"}',
    b"\xff\xfe\x00garbage",
    b'{"jsonrpc":"2.0","id":12,"method":"tools/call","params":5}',
    b'{"jsonrpc":"2.0","id":13,"method":"no/such/method"}',
    b'"just a string"',
    b"{}",
    b'{"jsonrpc":"2.0","id":true,"method":"ping"}',
]


def _parsed(line: bytes) -> Any:
    try:
        return json.loads(line.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return ValueError


def _expected_answers(line: bytes) -> set[int]:
    """How many answers a line must get: notifications and stray responses may get none."""
    if not line.decode("utf-8", "replace").strip():
        return {0}  # a blank line is no message
    message = _parsed(line)
    if isinstance(message, dict) and ("id" not in message or "method" not in message):
        return {0, 1}
    return {1}


def _request_id(line: bytes) -> Any:
    """The id of a line that parses as a request: its answer may come after later ones
    (requests run concurrently), so the exchange waits for it by id."""
    message = _parsed(line)
    if isinstance(message, dict) and "method" in message:
        request_id = message.get("id")
        if isinstance(request_id, (int, str)) and not isinstance(request_id, bool):
            return request_id
    return None


def _exchange(raw: RawServer, line: bytes, sentinel: str) -> list[dict[str, Any]]:
    """Send one line, then a ping; every answer until the ping's (and the line's own) arrived.

    Lines the transport refuses are answered before it reads the next line, so their
    answers come before the ping's."""
    raw.send(line + b"\n" + json.dumps({"jsonrpc": "2.0", "id": sentinel, "method": "ping"}).encode() + b"\n")
    waiting = {sentinel} | ({_request_id(line)} - {None})
    answers = []
    while waiting:
        answer = raw.answer()
        waiting.discard(answer.get("id"))
        if answer.get("id") != sentinel:
            answers.append(answer)
    return answers


def _check_answers(line: bytes, answers: list[dict[str, Any]]) -> None:
    assert len(answers) in _expected_answers(line), (line[:200], answers)
    for answer in answers:
        assert answer.get("jsonrpc") == "2.0", answer
        if "error" in answer:
            assert answer["error"]["code"] in (-32700, -32600, -32601, -32602), answer
            assert len(json.dumps(answer)) < 4 * MESSAGE_MAX_CHARS, "an error must not echo the line"
        else:
            assert "result" in answer, answer
            if answer["result"].get("isError"):
                assert answer["result"]["structuredContent"]["error"]["code"] in EXPECTED_CODES, answer


@pytest.mark.parametrize("line", KNOWN_BAD, ids=[repr(b[:30]) for b in KNOWN_BAD])
def test_known_bad_lines_on_stdin_are_each_answered(raw: RawServer, line: bytes) -> None:
    answers = _exchange(raw, line, f"sentinel-{hash(line)}")
    _check_answers(line, answers)
    assert len(answers) == 1
    request_id = _readable_id(line)
    if request_id is not None:
        assert answers[0]["id"] == request_id, "the id must be echoed when it can be read"


def _readable_id(line: bytes) -> Any:
    head = line[:60].decode("utf-8", "replace")
    for candidate in ('"id":5,', '"id":6,', '"id":7,', '"id":8,', '"id":9,', '"id":"s",', '"id": 11,',
                      '"id":12,', '"id":13,'):
        if candidate in head:
            return json.loads(candidate.split(":", 1)[1].rstrip(","))
    return None


def _mutations() -> st.SearchStrategy[bytes]:
    good = (TEMPLATE % ("42", '"a lesson about cups"', '{"params":{"f":1}}')).encode()
    cut = st.integers(0, len(good)).map(lambda i: good[:i])
    spliced = st.tuples(st.integers(0, len(good)), st.binary(max_size=8)).map(
        lambda t: good[: t[0]] + t[1] + good[t[0]:])
    values = st.tuples(json_values, json_values).map(
        lambda t: (TEMPLATE % ("43", json.dumps(t[0]), json.dumps(t[1]))).encode())
    return st.one_of(st.binary(max_size=60), cut, spliced, values).map(
        lambda b: b.replace(b"\n", b" ").replace(b"\r", b" "))


def test_random_bytes_and_broken_requests_on_stdin_are_each_answered(raw: RawServer) -> None:
    sent = [0]

    @settings(max_examples=150, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(_mutations())
    def check(line: bytes) -> None:
        sent[0] += 1
        _check_answers(line, _exchange(raw, line, f"sentinel-{sent[0]}"))

    check()
    assert raw.call("after", "learn", {"insight": "still serving"})["result"]["isError"] is False


def test_invalid_utf8_inside_a_json_string_is_a_parse_error_and_not_stored(raw: RawServer) -> None:
    # Replacing the bytes with U+FFFD stored text the client never sent.
    line = (TEMPLATE % ("21", '"bad \xff\xfe bytes"', "{}")).encode("latin-1")
    assert _exchange(raw, line, "sentinel-utf8") == [{"jsonrpc": "2.0", "id": 21, "error": {
        "code": -32700, "message": "parse error: the line is not valid UTF-8"}}]
    found = raw.call("utf8-recall", "recall", {"query": "bad bytes", "min_relevance": 0, "min_confidence": 0})
    assert found["result"]["structuredContent"]["count"] == 0


def test_a_fractional_id_is_refused_saying_what_an_id_may_be(raw: RawServer) -> None:
    answers = _exchange(raw, b'{"jsonrpc":"2.0","id":2.0,"method":"ping"}', "sentinel-float-id")
    assert answers == [{"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600, "message": "invalid request: id must be a string or an integer"}}]
