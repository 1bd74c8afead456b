"""The MCP server on PostgreSQL: it keeps answering while the database is down (a storage
error for each call) and serves again when the database is back, without a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp_client_helpers import call_error, call_ok, stdio_session

pytestmark = pytest.mark.anyio


async def test_the_server_answers_with_storage_errors_while_postgresql_is_down_and_recovers(
    robotmem_home: Path, tmp_path: Path, own_server: tuple[Any, Path]
):
    import pgserver

    server, pgdata = own_server
    log = tmp_path / "server.log"
    async with stdio_session(robotmem_home, log, ROBOTMEM_URL=server.get_uri(),
                             ROBOTMEM_EMBEDDINGS="off") as session:
        first = await call_ok(session, "learn", {"insight": "the dock door opens at 7"})
        server.cleanup()  # PostgreSQL stops under the running MCP server
        error = await call_error(session, "recall", {"query": "dock door"})
        assert error["code"] == "storage_error"  # the details go to the server log, not the client
        error = await call_error(session, "learn", {"insight": "learned while the database is down"})
        assert error["code"] == "storage_error"
        # An expected, explained failure: one line per call with its cause, no traceback.
        failures = [line for line in log.read_text(encoding="utf-8").splitlines() if "storage failure" in line]
        assert len(failures) == 2 and all("PostgreSQL" in line for line in failures), failures
        assert "Traceback" not in log.read_text(encoding="utf-8")
        back = pgserver.get_server(pgdata, cleanup_mode="stop")
        try:
            found = await call_ok(session, "recall", {"query": "dock door"})
            assert [hit["id"] for hit in found["results"]] == [first["memory_id"]]
            assert (await call_ok(session, "learn", {"insight": "learned after the restart"}))["status"] == "created"
        finally:
            back.cleanup()
