"""``python -m robotmem`` over stdio, driven end to end by the SDK's own client.

These run the real server subprocess with the real SQLite store and the real ONNX model
(the shared model cache of the test run), so recall here is hybrid search.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError
from mcp_client_helpers import (
    call_error,
    call_ok,
    read_json_resource,
    start_session_with_memories,
    stdio_session,
)

from robotmem import Memory

pytestmark = pytest.mark.anyio

TOOL_PARAMETERS = {
    "learn": {"insight", "context", "collection", "session_id", "occurred_at"},
    "recall": {
        "query",
        "collection",
        "n",
        "min_confidence",
        "min_relevance",
        "session_id",
        "context_filter",
        "spatial_sort",
        "since",
        "until",
    },
    "save_perception": {"description", "perception_type", "data", "metadata", "collection", "session_id",
                        "occurred_at"},
    "forget": {"memory_id", "reason"},
    "update": {"memory_id", "new_content", "context"},
    "start_session": {"collection", "context", "session_id"},
    "end_session": {"session_id", "outcome_score"},
    "outcome_stats": {
        "group_by",
        "query",
        "collection",
        "context_filter",
        "spatial_sort",
        "k",
        "bins",
        "success_threshold",
        "since",
        "until",
    },
}
#: Python parameters a tool leaves out (docs/mcp.md lists them): a client has no vectors of the server's model.
NOT_OVER_MCP = {"recall": {"query_vector"}}

REQUIRED = {
    "learn": {"insight"},
    "recall": {"query"},
    "save_perception": {"description"},
    "forget": {"memory_id", "reason"},
    "update": {"memory_id", "new_content"},
    "start_session": set(),
    "end_session": {"session_id"},
    "outcome_stats": {"group_by"},
}


async def test_the_server_lists_exactly_the_eight_tools_with_the_python_api_parameters(
    robotmem_home: Path, tmp_path: Path
) -> None:
    async with stdio_session(robotmem_home, tmp_path / "server.log") as session:
        tools = (await session.list_tools()).tools
    assert {tool.name: set(tool.input_schema["properties"]) for tool in tools} == TOOL_PARAMETERS
    # "the same names and parameters as the Python API", checked against the Python API itself
    python_api = {name: set(inspect.signature(getattr(Memory, name)).parameters) - {"self"}
                  - NOT_OVER_MCP.get(name, set()) for name in TOOL_PARAMETERS}
    assert python_api == TOOL_PARAMETERS
    for tool in tools:
        assert set(tool.input_schema.get("required", [])) == REQUIRED[tool.name]
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        # Short enough to cost clients little, long enough to say when to use it and what returns.
        assert 60 <= len(tool.description or "") <= 400, tool.name
        assert "Returns" in (tool.description or "")
        for name, schema in tool.input_schema["properties"].items():
            assert schema.get("description"), f"{tool.name}.{name} has no description"


async def test_all_seven_tools_work_end_to_end_with_json_as_objects_and_as_strings(
    robotmem_home: Path, tmp_path: Path
) -> None:
    async with stdio_session(robotmem_home, tmp_path / "server.log") as session:
        ids = await start_session_with_memories(session)

        found = await call_ok(session, "recall", {"query": "how hard to grip a cup", "collection": "kitchen"})
        assert found["mode"] == "hybrid", "the real model is loaded, so recall is hybrid"
        assert found["results"][0]["id"] == ids["grip"]
        assert found["count"] == len(found["results"])

        as_object = await call_ok(
            session,
            "recall",
            {"query": "", "collection": "kitchen", "context_filter": {"params.grip_force": {"$gte": 10}}},
        )
        as_string = await call_ok(
            session,
            "recall",
            {"query": "", "collection": "kitchen", "context_filter": '{"params.grip_force": {"$gte": 10}}'},
        )
        assert [hit["id"] for hit in as_object["results"]] == [ids["grip"]]
        assert [hit["id"] for hit in as_string["results"]] == [ids["grip"]]

        nearest = await call_ok(
            session,
            "recall",
            {
                "query": "",
                "collection": "kitchen",
                "spatial_sort": json.dumps({"field": "spatial.object_position", "target": [1.0, 0.4]}),
            },
        )
        assert nearest["results"][0]["id"] == ids["touch"]
        assert nearest["results"][0]["distance"] == pytest.approx(0.1, abs=1e-6)

        updated = await call_ok(
            session,
            "update",
            {
                "memory_id": ids["approach"],
                "new_content": "Approach the mug handle from the right side; the kettle moved",
                "context": '{"params": {"grip_force": 7.0}}',
            },
        )
        assert updated["status"] == "updated"
        forgotten = await call_ok(
            session, "forget", {"memory_id": ids["grip"], "reason": "cup replaced by a lighter one"}
        )
        assert forgotten == {**forgotten, "memory_id": ids["grip"], "status": "forgotten"}

        # Every hit (min_relevance 0): this checks what update and forget changed, not relevance.
        after = await call_ok(
            session, "recall", {"query": "grip the cup mug", "collection": "kitchen", "n": 10, "min_relevance": 0}
        )
        contents = {hit["id"]: hit["content"] for hit in after["results"]}
        assert ids["grip"] not in contents
        assert "right side" in contents[ids["approach"]]

        ended = await call_ok(session, "end_session", {"session_id": ids["sid"], "outcome_score": 0.9})
        assert ended["session_id"] == ids["sid"] and ended["status"] == "ended"
        assert ended["perceptions"] == 2 and isinstance(ended["memories"], int)


async def test_resources_show_a_session_timeline_the_sessions_stats_and_status(
    robotmem_home: Path, tmp_path: Path
) -> None:
    async with stdio_session(robotmem_home, tmp_path / "server.log") as session:
        ids = await start_session_with_memories(session)
        templates = (await session.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["robotmem://sessions/{session_id}"]
        listed = {str(r.uri) for r in (await session.list_resources()).resources}
        assert listed == {"robotmem://sessions", "robotmem://stats", "robotmem://status"}

        timeline = await read_json_resource(session, f"robotmem://sessions/{ids['sid']}")
        assert timeline["session"]["session_id"] == ids["sid"]
        ordered = [record["id"] for record in timeline["memories"]]
        assert ordered[:2] == [ids["grip"], ids["approach"]] and ids["touch"] in ordered

        sessions = await read_json_resource(session, "robotmem://sessions")
        assert [s["session_id"] for s in sessions["sessions"]] == [ids["sid"]] and sessions["count"] == 1

        stats = await read_json_resource(session, "robotmem://stats")
        assert stats["facts"] == 2 and stats["perceptions"] == 2 and stats["sessions"] == 1
        assert str(robotmem_home) not in json.dumps(stats), "no server paths in what clients read"

        status = await read_json_resource(session, "robotmem://status")
        assert status["store"] == "ready"

        with pytest.raises(MCPError) as caught:
            await session.read_resource("robotmem://sessions/ses_doesnotexist")
        assert "ses_doesnotexist" in str(caught.value)
        # The server is still there after the failed read.
        assert (await read_json_resource(session, "robotmem://stats"))["facts"] == 2


async def test_a_session_summary_stored_with_a_lone_surrogate_does_not_take_the_server_down(
    robotmem_home: Path, tmp_path: Path
) -> None:
    """Imports before summaries were checked stored one as given. Reading it failed to serialise
    (UTF-8 cannot hold the surrogate): the sessions resource got no answer and the server exited."""
    with Memory(robotmem_home / "memory.db", embedder=None) as mem:
        sid = mem.start_session()["session_id"]
        summary = {**mem.end_session(sid, 0.5), "note": "a\ud800b"}
        with mem.store.write() as conn:
            conn.execute("UPDATE sessions SET summary = ? WHERE id = ?", (json.dumps(summary), sid))
        read = {**summary, "note": "a\ufffdb"}
    async with stdio_session(robotmem_home, tmp_path / "server.log", ROBOTMEM_EMBEDDINGS="off") as session:
        sessions = await read_json_resource(session, "robotmem://sessions")
        assert sessions["sessions"][0]["summary"] == read
        timeline = await read_json_resource(session, f"robotmem://sessions/{sid}")
        assert timeline["session"]["summary"] == read
        ended = await call_ok(session, "end_session", {"session_id": sid})  # already ended: the stored summary
        assert ended == {**read, "status": "already_ended"}
        assert (await call_ok(session, "learn", {"insight": "the server still answers"}))["status"] == "created"


async def test_logs_go_to_stderr_and_the_store_closes_when_the_client_disconnects(
    robotmem_home: Path, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    async with stdio_session(robotmem_home, log) as session:
        # Any stray stdout line would have broken the client's JSON-RPC parsing already.
        await call_ok(session, "learn", {"insight": "Logs belong on stderr"})
        await call_ok(session, "recall", {"query": "logs"})
    text = log.read_text(encoding="utf-8")
    assert "memory store open" in text
    assert "memory store closed" in text, "closing stdin shuts the server down through its lifespan"


async def test_a_control_loop_names_its_episode_and_dates_what_it_stores(robotmem_home: Path, tmp_path: Path) -> None:
    # start_session's session_id and learn/save_perception's occurred_at, as in the Python API.
    async with stdio_session(robotmem_home, tmp_path / "server.log", ROBOTMEM_EMBEDDINGS="off") as session:
        first = await call_ok(session, "start_session", {"collection": "lab", "session_id": "run7_ep3"})
        again = await call_ok(session, "start_session", {"collection": "lab", "session_id": "run7_ep3"})
        assert (first["session_id"], first["status"], again["status"]) == ("run7_ep3", "started", "exists")
        await call_ok(session, "learn", {"insight": "the wet bottle slipped at 6 N", "session_id": "run7_ep3",
                                         "occurred_at": "2026-12-01T08:00:00Z"})
        await call_ok(session, "save_perception", {"description": "wrist force during the grasp",
                                                   "perception_type": "tactile", "session_id": "run7_ep3",
                                                   "occurred_at": 1_796_112_000.5})
        found = await call_ok(session, "recall", {"query": "", "session_id": "run7_ep3", "min_confidence": 0,
                                                  "since": 1_796_112_000, "until": "2026-12-01T08:00:01Z"})
        assert sorted(hit["occurred_at"] for hit in found["results"]) == [1_796_112_000.0, 1_796_112_000.5]
        error = await call_error(session, "learn", {"insight": "x", "occurred_at": "yesterday"})
        assert (error["code"], error["field"]) == ("validation_error", "occurred_at")
        error = await call_error(session, "start_session", {"session_id": "not an id"})
        assert (error["code"], error["field"]) == ("validation_error", "session_id")
