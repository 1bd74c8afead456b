"""The robotmem MCP server: the SDK's ``MCPServer`` with a structured error boundary.

The SDK reports arguments that fail the input schema (a string for ``n``, a missing
``insight``) as a plain-text tool error. Clients of robotmem get the same structured
``validation_error`` naming the parameter for those as for errors ``Memory`` raises, so
``call_tool`` is overridden here to translate them; tool bodies translate their own.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import ValidationError as PydanticValidationError

from ..config import Config
from .boundary import error_result, result_for_argument_errors, result_for_exception
from .resources import register_resources
from .runtime import MemoryRuntime
from .tools import register_tools

__all__ = ["SERVER_NAME", "RobotMemServer", "build_server"]

log = logging.getLogger("robotmem.mcp")

SERVER_NAME = "robotmem"
INSTRUCTIONS = (
    "Episodic memory for robots. recall before acting; learn lessons and save_perception "
    "observations after; group one task attempt with start_session/end_session."
)


class RobotMemServer(MCPServer[MemoryRuntime]):
    """``MCPServer`` whose tool calls always end in a ``CallToolResult``."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Any = None
    ) -> CallToolResult | InputRequiredResult:
        tool = self._tool_manager.get_tool(name)
        if tool is None:
            return error_result("not_found", f"unknown tool {name!r}", "name")
        unknown = sorted(set(arguments) - set(tool.parameters.get("properties", {})))
        if unknown:
            # Silently dropping a misspelt parameter ("limit" for "n") would hide the mistake.
            expected = ", ".join(tool.parameters.get("properties", {}))
            return error_result(
                "validation_error", f"unknown parameter {unknown[0]!r}; {name} takes {expected}", unknown[0]
            )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            # UnexpectedToolError also wraps pydantic errors (a result failing its output
            # schema): that is our bug, not the caller's, so it must not read as validation.
            if not isinstance(exc, UnexpectedToolError) and isinstance(
                exc.__cause__, PydanticValidationError
            ):
                return result_for_argument_errors(name, exc.__cause__)
            return result_for_exception(name, exc.__cause__ or exc)


def build_server(config: Config | None = None) -> RobotMemServer:
    """A server over ``config`` (default: ``Config.load()``); the store opens in its lifespan."""
    config = config if config is not None else Config.load()
    runtime = MemoryRuntime(config)
    server = RobotMemServer(
        SERVER_NAME,
        instructions=INSTRUCTIONS,
        version=_version(),
        lifespan=runtime.lifespan,
    )
    register_tools(server, runtime)
    register_resources(server, runtime)
    return server


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("robotmem")
    except PackageNotFoundError:
        return "0+unknown"
