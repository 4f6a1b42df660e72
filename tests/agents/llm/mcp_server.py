"""An MCP server over stdio, written with the official ``mcp`` SDK, for the LLM agent tests."""

from __future__ import annotations

from mcp.server import MCPServer

server = MCPServer("test-tools")


@server.tool()
def shout(text: str) -> str:
    """Say a text louder."""
    return text.upper() + "!"


@server.tool()
def fail(reason: str) -> str:
    """A tool that always fails."""
    raise ValueError(f"refused: {reason}")


if __name__ == "__main__":
    server.run("stdio")
