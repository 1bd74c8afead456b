"""A ``tools/call`` whose ``name`` or ``arguments`` has the wrong shape: an error naming the field.

The SDK validates a request's params against the MCP schema before any handler runs, and
answers a failure with JSON-RPC -32602 "Invalid request parameters" and empty ``data``
(``handler_exception_to_error_data``: no pydantic text on the wire). For ``tools/call``
that leaves a client sending ``arguments`` as an array, or no ``name``, with nothing to
go on. The SDK's own hook for this is server middleware, which runs before that
validation (``mcp.server.context.ServerMiddleware``); this one checks the two fields a
tool call is made of and refuses a wrong shape with the same code, a message naming the
field, and ``data: {"field": ...}``. Everything else goes on to the SDK unchanged.

It stays a JSON-RPC error, not a tool result: such a request is not an MCP tool call
(no client built on the SDK can send one), and answering it as a tool's result would
name a tool that was never called.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

__all__ = ["refuse_malformed_tool_calls"]


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _problem(params: Any) -> tuple[str, str] | None:
    """(field, message) for a ``tools/call`` params object whose name or arguments is malformed."""
    if not isinstance(params, dict):
        return None  # absent or not an object: the SDK's validation answers that
    if "name" not in params:
        return "name", "tools/call: name is required (the tool to call)"
    if not isinstance(params["name"], str):
        return "name", f"tools/call: name must be a string, got {_json_type(params['name'])}"
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        return "arguments", f"tools/call: arguments must be a JSON object, got {_json_type(arguments)}"
    return None


async def refuse_malformed_tool_calls(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    if ctx.method == "tools/call" and (problem := _problem(ctx.params)) is not None:
        field, message = problem
        raise MCPError(code=INVALID_PARAMS, message=message, data={"field": field})
    return await call_next(ctx)
