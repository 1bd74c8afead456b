"""Read-only resources: what an agent may want to look at without calling a tool.

* ``robotmem://sessions/{session_id}``: one session and its memories in time order;
* ``robotmem://sessions``: the newest sessions (up to 100), to find an id;
* ``robotmem://stats``: counts per kind and collection;
* ``robotmem://status``: whether the store is open and the embedding model loaded.

Errors follow the MCP resource conventions: an unknown session is "resource not found"
(JSON-RPC -32602), anything else is a resource error whose message names no internals.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from ..errors import NotFoundError, RobotMemError, StorageError
from .boundary import STORAGE_MESSAGE, log_storage_failure
from .runtime import MemoryRuntime

if TYPE_CHECKING:
    from ..service import Memory

__all__ = ["register_resources"]

_JSON = "application/json"


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, indent=1)


#: A long-lived robot accumulates thousands of sessions; an agent needs the recent ones.
SESSIONS_SHOWN = 100


def _newest_sessions(memory: Memory) -> dict[str, Any]:
    sessions = memory.list_sessions()
    return {
        "count": len(sessions),
        "shown": min(len(sessions), SESSIONS_SHOWN),
        "sessions": sessions[:SESSIONS_SHOWN],
    }


def _stats_without_paths(memory: Memory) -> dict[str, Any]:
    # The database path is the server's business, not something to hand to remote clients.
    stats = dict(memory.stats())
    stats.pop("path", None)
    return stats


def register_resources(server: MCPServer[Any], runtime: MemoryRuntime) -> None:
    async def read(what: str, call: Callable[[Memory], Any]) -> str:
        try:
            return _dump(await runtime.call(call))
        except NotFoundError as exc:
            raise ResourceNotFoundError(exc.message) from exc
        except StorageError as exc:
            log_storage_failure(f"resource {what}", exc)
            raise ResourceError(STORAGE_MESSAGE) from exc
        except RobotMemError as exc:
            raise ResourceError(f"{exc.code}: {exc.message}") from exc

    @server.resource(
        "robotmem://sessions/{session_id}",
        name="session_timeline",
        description="One session (episode) and its memories and perceptions in time order.",
        mime_type=_JSON,
    )
    async def session_timeline(session_id: str) -> str:
        return await read("session_timeline", lambda m: m.session_timeline(session_id))

    @server.resource(
        "robotmem://sessions",
        name="sessions",
        description="The newest 100 sessions (open/ended) with collection, context, times and summary.",
        mime_type=_JSON,
    )
    async def sessions() -> str:
        return await read("sessions", _newest_sessions)

    @server.resource(
        "robotmem://stats",
        name="stats",
        description="Store statistics: memories, facts, perceptions and sessions, per collection.",
        mime_type=_JSON,
    )
    async def stats() -> str:
        return await read("stats", _stats_without_paths)

    @server.resource(
        "robotmem://status",
        name="status",
        description="Server state: store opening/ready/failed; embeddings pending/unloaded/loading/ready/failed/off.",
        mime_type=_JSON,
    )
    async def status() -> str:
        # Deliberately does not wait for the store: it answers while the store is opening.
        return _dump(runtime.status())
