"""The robotmem MCP server: the SDK's ``MCPServer`` with a structured error boundary.

The SDK reports arguments that fail the input schema (a string for ``n``, a missing
``insight``) as a plain-text tool error. Clients of robotmem get the same structured
``validation_error`` naming the parameter for those as for errors ``Memory`` raises, so
``call_tool`` is overridden here to translate them; tool bodies translate their own.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import ValidationError as PydanticValidationError

from ..config import Config
from ..errors import ValidationError, brief
from .body_gate import request_body_limit
from .boundary import error_result, forget_traceback, result_for_argument_errors, result_for_exception
from .call_shape import refuse_malformed_tool_calls
from .resources import register_resources
from .runtime import MemoryRuntime
from .stdio import answering_stdio_server
from .tools import register_tools

__all__ = ["SERVER_NAME", "RobotMemServer", "build_server"]

log = logging.getLogger("robotmem.mcp")

SERVER_NAME = "robotmem"
INSTRUCTIONS = (
    "Episodic memory for robots. recall before acting; learn lessons and save_perception "
    "observations after; group one task attempt with start_session/end_session."
)


class RobotMemServer(MCPServer[MemoryRuntime]):
    """``MCPServer`` whose tool calls always end in a ``CallToolResult``, and whose stdio
    transport answers every line (see ``stdio``)."""

    #: The longest stdio line read (the HTTP body cap; set by ``build_server``).
    max_line_bytes: int = DEFAULT_MAX_REQUEST_BODY_SIZE
    #: Set when a stdio run ended because the client closed stdout.
    stdout_closed: bool = False

    async def run_stdio_async(self) -> None:
        async with answering_stdio_server(self.max_line_bytes) as wire:
            with anyio.CancelScope() as serving:
                wire.stop = serving.cancel  # stdout closed: stop serving (the lifespan closes the store)
                await self._lowlevel_server.run(
                    wire.read_stream, wire.write_stream, self._lowlevel_server.create_initialization_options()
                )
        self.stdout_closed = wire.stdout_closed

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Any = None
    ) -> CallToolResult | InputRequiredResult:
        tool = self._tool_manager.get_tool(name)
        if tool is None:
            return error_result("not_found", f"unknown tool {brief(name)}", "name")
        refusal = _unknown_parameter(name, tool.parameters, arguments)
        if refusal is not None:
            return refusal
        try:
            return await super().call_tool(name, _without_null_optionals(tool.parameters, arguments), context)
        except ToolError as exc:
            try:
                # UnexpectedToolError also wraps pydantic errors (a result failing its output
                # schema): that is our bug, not the caller's, so it must not read as validation.
                if not isinstance(exc, UnexpectedToolError) and isinstance(
                    exc.__cause__, PydanticValidationError
                ):
                    return result_for_argument_errors(name, exc.__cause__)
                return result_for_exception(name, exc.__cause__ or exc)
            finally:
                forget_traceback(exc)
        except MCPError:
            raise  # a protocol-level error the SDK means to send as such
        except Exception as exc:  # noqa: BLE001 - the boundary: nothing escapes a tool call
            return result_for_exception(name, exc)


def _unknown_parameter(name: str, schema: dict[str, Any], arguments: dict[str, Any]) -> CallToolResult | None:
    """Refuse a misspelt parameter ("limit" for "n"): silently dropping it hides the mistake."""
    known = schema.get("properties", {})
    unknown = sorted(set(arguments) - set(known))
    if not unknown:
        return None
    # Built as a ValidationError so the message and field are cut like every other error's.
    error = ValidationError(f"unknown parameter {brief(unknown[0])}; {name} takes {', '.join(known)}",
                            field=unknown[0])
    return error_result(error.code, error.message, error.field)


def _without_null_optionals(schema: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """Many clients send ``null`` for every optional parameter they leave unset: that means
    "use the default", not "a null n". Required parameters keep their null (and get an error)."""
    required = set(schema.get("required", []))
    return {key: value for key, value in arguments.items() if value is not None or key in required}


async def release_tool_arguments(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Let go of a tool call's arguments once it is answered.

    The SDK's receive loop (``JSONRPCDispatcher.run``: ``async for item in read_stream``)
    keeps the last message it received until the next one arrives, so an idle session
    held its last call's arguments: after a refused 45 MiB save_perception, ~190 MB of
    parsed floats per session. ``ctx.params`` is that message's params; dropping
    ``arguments`` from it once the handler returned frees them. Nothing reads a request's
    params after its handler returned.
    """
    try:
        return await call_next(ctx)
    finally:
        if ctx.method == "tools/call" and isinstance(ctx.params, dict):
            ctx.params.pop("arguments", None)


def build_server(config: Config | None = None) -> RobotMemServer:
    """A server over ``config`` (default: ``Config.load()``); the store opens in its lifespan."""
    config = config if config is not None else Config.load()
    runtime = MemoryRuntime(config)
    server = RobotMemServer(
        SERVER_NAME,
        instructions=INSTRUCTIONS,
        version=_version(),
        lifespan=runtime.lifespan,
        middleware=[release_tool_arguments, refuse_malformed_tool_calls],
    )
    server.max_line_bytes = request_body_limit(config)
    register_tools(server, runtime)
    register_resources(server, runtime)
    return server


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("robotmem")
    except PackageNotFoundError:
        return "0+unknown"
