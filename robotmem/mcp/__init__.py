"""The robotmem MCP server: the seven memory operations as MCP tools, plus read-only resources.

``python -m robotmem`` serves over stdio; ``robotmem serve --transport http`` over
streamable HTTP. See docs/mcp.md.
"""

from .server import RobotMemServer, build_server

__all__ = ["RobotMemServer", "build_server"]
