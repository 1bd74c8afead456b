"""Bad input over a real stdio connection: each mistake gets a structured error naming the
field, and the very next call on the same connection succeeds.

One server serves the whole table (embeddings off: none of these reach the model; the
end-to-end tests use it). Its payload limit is lowered so "oversized" stays small.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp_client_helpers import call_error, call_ok, stdio_session

PAYLOAD_LIMIT = 4096
UNKNOWN_ID = 987_654


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[ClientSession, Path]]:
    home = tmp_path_factory.mktemp("bad-input-home")
    log = home / "server.log"
    async with stdio_session(
        home, log, ROBOTMEM_EMBEDDINGS="off", ROBOTMEM_MAX_PAYLOAD_BYTES=str(PAYLOAD_LIMIT)
    ) as session:
        yield session, log


@pytest.fixture
async def session(server: tuple[ClientSession, Path]) -> ClientSession:
    return server[0]


def _nested_text(levels: int) -> str:
    return '{"k": ' * levels + "1" + "}" * levels


BAD_CALLS: list[tuple[str, str, dict[str, Any], str, str]] = [
    # (case id, tool, arguments, expected code, expected field)
    ("empty insight", "learn", {"insight": ""}, "validation_error", "insight"),
    ("301-character insight", "learn", {"insight": "x" * 301}, "validation_error", "insight"),
    ("n 0", "recall", {"query": "cup", "n": 0}, "validation_error", "n"),
    ("since true", "recall", {"query": "cup", "since": True}, "validation_error", "since"),
    ("until false", "recall", {"query": "cup", "until": False}, "validation_error", "until"),
    ("n 101", "recall", {"query": "cup", "n": 101}, "validation_error", "n"),
    ("min_confidence -0.1", "recall", {"query": "cup", "min_confidence": -0.1}, "validation_error", "min_confidence"),
    ("min_confidence 1.5", "recall", {"query": "cup", "min_confidence": 1.5}, "validation_error", "min_confidence"),
    ("memory_id 0", "forget", {"memory_id": 0, "reason": "wrong"}, "validation_error", "memory_id"),
    ("memory_id -1", "update", {"memory_id": -1, "new_content": "new text"}, "validation_error", "memory_id"),
    ("unknown memory_id forget", "forget", {"memory_id": UNKNOWN_ID, "reason": "wrong"}, "not_found", "memory_id"),
    ("unknown memory_id update", "update", {"memory_id": UNKNOWN_ID, "new_content": "x y"}, "not_found", "memory_id"),
    ("malformed JSON context", "learn", {"insight": "cup", "context": '{"params": {"f": 1}'}, "validation_error", "context"),
    ("malformed JSON filter", "recall", {"query": "cup", "context_filter": "{task.name: cup}"}, "validation_error", "context_filter"),
    ("malformed JSON metadata", "save_perception", {"description": "a cup seen", "metadata": "{,}"}, "validation_error", "metadata"),
    ("malformed JSON data", "save_perception", {"description": "a cup seen", "data": "[0.1, 0.2"}, "validation_error", "data"),
    ("malformed JSON spatial_sort", "recall", {"query": "", "spatial_sort": '{"field": '}, "validation_error", "spatial_sort"),
    ("JSON array as context", "learn", {"insight": "cup", "context": "[1, 2]"}, "validation_error", "context"),
    ("unknown filter operator", "recall", {"query": "cup", "context_filter": {"params.f": {"$regex": "^1"}}}, "validation_error", "context_filter"),
    ("perception_type smell", "save_perception", {"description": "burnt toast smell", "perception_type": "smell"}, "validation_error", "perception_type"),
    ("outcome_score 2", "end_session", {"session_id": "ses_0123456789ab", "outcome_score": 2}, "validation_error", "outcome_score"),
    ("oversized payload", "save_perception", {"description": "huge point cloud", "data": list(range(PAYLOAD_LIMIT))}, "validation_error", "data"),
    ("string for n", "recall", {"query": "cup", "n": "five"}, "validation_error", "n"),
    ("numeric string for n", "recall", {"query": "cup", "n": "5"}, "validation_error", "n"),
    ("string for memory_id", "forget", {"memory_id": "12", "reason": "wrong"}, "validation_error", "memory_id"),
    ("number for insight", "learn", {"insight": 42}, "validation_error", "insight"),
    ("boolean for min_confidence", "recall", {"query": "cup", "min_confidence": True}, "validation_error", "min_confidence"),
    ("missing insight", "learn", {}, "validation_error", "insight"),
    ("missing reason", "forget", {"memory_id": 1}, "validation_error", "reason"),
    ("missing query", "recall", {"n": 3}, "validation_error", "query"),
    ("missing session_id", "end_session", {}, "validation_error", "session_id"),
    ("misspelt parameter", "recall", {"query": "cup", "limit": 3}, "validation_error", "limit"),
    ("unknown session", "end_session", {"session_id": "ses_0123456789ab"}, "not_found", "session_id"),
    ("numeric string for min_relevance", "recall", {"query": "cup", "min_relevance": "0.5"}, "validation_error", "min_relevance"),
    ("boolean for min_relevance", "recall", {"query": "cup", "min_relevance": True}, "validation_error", "min_relevance"),
    ("numeric string for bins", "outcome_stats", {"group_by": "params.f", "bins": "5"}, "validation_error", "bins"),
    # The SDK parses a JSON string argument before robotmem sees it: depth is checked on the value.
    ("data nested 100 levels, as JSON text", "save_perception", {"description": "deep probe", "data": _nested_text(100)}, "validation_error", "data"),
    ("data nested 600 levels, as JSON text", "save_perception", {"description": "deep probe", "data": _nested_text(600)}, "validation_error", "data"),
    ("data nested 100 levels, as an object", "save_perception", {"description": "deep probe", "data": json.loads(_nested_text(100))}, "validation_error", "data"),
    ("1 MiB group_by", "outcome_stats", {"group_by": "a" * (1 << 20)}, "validation_error", "group_by"),
    ("5,000-character filter key", "recall", {"query": "cup", "context_filter": {"a" * 5000: 1}}, "validation_error", "context_filter"),
    ("5,000-character spatial field", "recall", {"query": "", "spatial_sort": {"field": "a" * 5000, "target": [0, 0]}}, "validation_error", "spatial_sort.field"),
    ("unknown session recall", "recall", {"query": "cup", "session_id": "ses_doesnotexist"}, "not_found", "session_id"),
    # A NUL in a key or a path was a storage_error (SQLite: "bad JSON path"; PostgreSQL cannot store it).
    ("NUL in a context key", "learn", {"insight": "cup", "context": {"a\x00b": 1}}, "validation_error", "context"),
    ("NUL in a metadata key", "save_perception", {"description": "a cup seen", "metadata": '{"a\\u0000b": 1}'}, "validation_error", "metadata"),
    ("NUL in a filter key", "recall", {"query": "cup", "context_filter": {"a\x00b": 1}}, "validation_error", "context_filter"),
    ("NUL in group_by", "outcome_stats", {"group_by": "a.\x00"}, "validation_error", "group_by"),
    # `$` in the id patterns matched before a final newline: "ses_a\n" was a second session, "lab\n" a second collection.
    ("session id ending in a newline", "start_session", {"session_id": "ses_a\n"}, "validation_error", "session_id"),
    ("collection ending in a newline", "learn", {"insight": "door sticks", "collection": "lab\n"}, "validation_error", "collection"),
    # Time windows hold to occurred_at's range, 1970 to the end of 9999 UTC.
    ("since 1e300", "recall", {"query": "cup", "since": 1e300}, "validation_error", "since"),
    ("until year 10000", "recall", {"query": "cup", "until": 253402300800}, "validation_error", "until"),
    ("since before 1970", "outcome_stats", {"group_by": "params.f", "since": "1969-12-31T00:00:00Z"}, "validation_error", "since"),
]  # fmt: skip


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "arguments", "code", "field"), [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS]
)
async def test_bad_input_is_a_structured_error_and_the_next_call_succeeds(
    session: ClientSession, tool: str, arguments: dict[str, Any], code: str, field: str
) -> None:
    error = await call_error(session, tool, arguments)
    # A nested problem names its dot path under the parameter (context_filter.params.f).
    assert error["code"] == code and (error["field"] == field or error["field"].startswith(field + ".")), (
        error
    )
    learned = await call_ok(
        session, "learn", {"insight": f"still answering after {tool} {json.dumps(arguments)[:80]}"}
    )
    assert learned["status"] in ("created", "duplicate")


@pytest.mark.anyio
async def test_an_unknown_tool_is_a_structured_not_found(session: ClientSession) -> None:
    error = await call_error(session, "remember", {"insight": "x"})
    assert (error["code"], error["field"]) == ("not_found", "name")
    assert (await call_ok(session, "recall", {"query": "answering"}))["count"] >= 0


@pytest.mark.anyio
async def test_a_payload_at_the_limit_is_stored_and_one_over_is_refused(session: ClientSession) -> None:
    # The boundary case of the oversize rule, with the server's configured limit.
    small = await call_ok(session, "save_perception", {"description": "a small payload", "data": [1, 2, 3]})
    assert 0 < small["payload_bytes"] <= PAYLOAD_LIMIT
    error = await call_error(
        session, "save_perception", {"description": "too big", "data": "x" * (PAYLOAD_LIMIT + 1)}
    )
    assert (error["code"], error["field"]) == ("validation_error", "data")


@pytest.mark.anyio
async def test_validation_messages_say_what_is_wrong(session: ClientSession) -> None:
    error = await call_error(session, "recall", {"query": "cup", "n": 101})
    assert "100" in error["message"]
    error = await call_error(
        session, "save_perception", {"description": "something smells burnt", "perception_type": "smell"}
    )
    assert "visual" in error["message"]


@pytest.mark.anyio
async def test_rejected_calls_lose_nothing_already_stored(session: ClientSession) -> None:
    stored = await call_ok(session, "learn", {"insight": "The charging dock is behind the sofa"})
    await call_error(session, "update", {"memory_id": stored["memory_id"], "new_content": ""})
    await call_error(session, "forget", {"memory_id": stored["memory_id"], "reason": ""})
    found = await call_ok(session, "recall", {"query": "charging dock sofa", "n": 3})
    assert any(hit["id"] == stored["memory_id"] and "sofa" in hit["content"] for hit in found["results"])


@pytest.mark.anyio
async def test_writing_into_an_ended_session_is_a_conflict(session: ClientSession) -> None:
    started = await call_ok(session, "start_session", {})
    await call_ok(session, "end_session", {"session_id": started["session_id"]})
    error = await call_error(session, "learn", {"insight": "too late", "session_id": started["session_id"]})
    assert (error["code"], error["field"]) == ("conflict", "session_id")
    again = await call_ok(session, "end_session", {"session_id": started["session_id"]})
    assert again["status"] == "already_ended"


@pytest.mark.anyio
async def test_null_for_an_optional_parameter_means_its_default(session: ClientSession) -> None:
    # Several clients send every optional parameter, unset ones as null.
    for place in ("shelf", "sink", "table", "tray", "dishwasher", "counter", "drawer"):
        await call_ok(session, "learn", {"insight": f"the blue cup is kept on the {place}"})
    found = await call_ok(
        session,
        "recall",
        {"query": "cup", "n": None, "min_confidence": None, "collection": None, "context_filter": None},
    )
    assert found["count"] == 5  # seven match: null n means the default 5, not 0, 1 or all
    error = await call_error(session, "learn", {"insight": None})
    assert (error["code"], error["field"]) == ("validation_error", "insight")
