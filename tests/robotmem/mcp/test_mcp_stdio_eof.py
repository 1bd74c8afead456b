"""End of stdin while tool calls are in flight: every request read is carried out and answered.

A client that writes its last requests and closes stdin still reads stdout. These tests
write raw JSON-RPC lines to a real ``python -m robotmem`` subprocess, close its stdin at
once and read stdout to the end: every request id must get exactly one answer, and the
real SQLite file must hold exactly the writes that were answered as stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcp_client_helpers import (
    RAW_INITIALIZE,
    RAW_INITIALIZED,
    close_and_read_answers,
    raw_tool_call,
    start_raw_stdio,
    write_raw,
)

from robotmem import Memory


def _stored_ids(answers: dict[Any, list[dict[str, Any]]], ids: list[int]) -> dict[int, int]:
    """request id -> memory_id, for each write answered as created."""
    stored = {}
    for request_id in ids:
        (answer,) = answers[request_id]
        assert "error" not in answer, answer
        result = answer["result"]
        assert result["isError"] is False, result
        assert result["structuredContent"]["status"] == "created"
        stored[request_id] = result["structuredContent"]["memory_id"]
    return stored


def _check_store(home: Path, expected: dict[int, str]) -> None:
    """The file holds exactly the memories answered as stored, with their text."""
    with Memory(home / "memory.db", embedder=None) as mem:
        assert mem.stats()["memories"] == len(expected)
        for memory_id, text in expected.items():
            assert mem.get(memory_id)["content"] == text


def test_a_call_sent_to_a_warm_server_right_before_eof_is_answered_and_stored(tmp_path: Path) -> None:
    home = tmp_path / "home"
    process = start_raw_stdio(home, tmp_path / "server.log", ROBOTMEM_EMBEDDINGS="off")
    assert process.stdout is not None
    write_raw(process, RAW_INITIALIZE)
    assert json.loads(process.stdout.readline())["id"] == "init"
    write_raw(process, RAW_INITIALIZED, raw_tool_call(1, "recall", {"query": "warm up"}))
    assert json.loads(process.stdout.readline())["id"] == 1  # the store is open: the server is warm
    description = "big payload before EOF small1"
    write_raw(process, raw_tool_call(2, "save_perception", {"description": description,
                                                            "data": {"x": list(range(10))}}))
    answers = close_and_read_answers(process)
    assert set(answers) == {2}
    stored = _stored_ids(answers, [2])
    _check_store(home, {stored[2]: description})


def test_pipelined_calls_and_eof_right_after_start_are_all_carried_out(tmp_path: Path) -> None:
    home = tmp_path / "home"
    process = start_raw_stdio(home, tmp_path / "server.log", ROBOTMEM_EMBEDDINGS="off")
    texts = {1: "learned right before EOF", 3: "another lesson right before EOF"}
    write_raw(
        process,
        RAW_INITIALIZE,
        RAW_INITIALIZED,
        raw_tool_call(1, "learn", {"insight": texts[1]}),
        raw_tool_call(2, "recall", {"query": "EOF"}),
        raw_tool_call(3, "learn", {"insight": texts[3]}),
        raw_tool_call(4, "save_perception", {"description": "a perception right before EOF", "data": [1, 2, 3]}),
        raw_tool_call(5, "learn", {"insight": ""}),  # refused: answered as a validation error, stores nothing
        '{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {',  # unreadable: parse error
    )
    texts[4] = "a perception right before EOF"
    answers = close_and_read_answers(process)
    assert set(answers) == {"init", 1, 2, 3, 4, 5, 6}
    assert all(len(found) == 1 for found in answers.values()), answers
    assert answers[2][0]["result"]["isError"] is False
    assert answers[5][0]["result"]["structuredContent"]["error"]["field"] == "insight"
    assert answers[6][0]["error"]["code"] == -32700
    stored = _stored_ids(answers, [1, 3, 4])
    _check_store(home, {stored[request_id]: texts[request_id] for request_id in stored})


def test_with_the_default_embeddings_a_learn_before_eof_waits_for_the_model_and_is_stored(tmp_path: Path) -> None:
    home = tmp_path / "home"
    process = start_raw_stdio(home, tmp_path / "server.log")
    text = "stored with its vector although stdin closed"
    write_raw(process, RAW_INITIALIZE, RAW_INITIALIZED, raw_tool_call(1, "learn", {"insight": text}))
    answers = close_and_read_answers(process)
    assert set(answers) == {"init", 1}
    stored = _stored_ids(answers, [1])
    _check_store(home, {stored[1]: text})
    with Memory(home / "memory.db", embedder=None) as mem:
        assert sum(mem.stats()["embeddings"].values()) == 1, "learn waits for the model, even at EOF"


def test_a_call_the_client_cancelled_before_eof_does_not_keep_the_server_running(tmp_path: Path) -> None:
    home = tmp_path / "home"
    process = start_raw_stdio(home, tmp_path / "server.log", ROBOTMEM_EMBEDDINGS="off")
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "gone"}}
    write_raw(process, RAW_INITIALIZE, RAW_INITIALIZED, raw_tool_call(1, "learn", {"insight": "maybe cancelled"}),
              cancel, raw_tool_call(2, "learn", {"insight": "not cancelled"}))
    answers = close_and_read_answers(process)  # exits: a cancelled call is owed no answer
    assert {"init", 2} <= set(answers) <= {"init", 1, 2}
    assert all(len(found) == 1 for found in answers.values()), answers
    stored = _stored_ids(answers, [2])
    with Memory(home / "memory.db", embedder=None) as mem:
        assert mem.get(stored[2])["content"] == "not cancelled"
