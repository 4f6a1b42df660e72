"""``mesh mcp``: the mesh's agents as MCP tools (the ``mcp`` extra, the official SDK).

:mod:`~gateways.mcp.tools` (one tool per agent), :mod:`~gateways.mcp.bridge` (the mesh side:
registry and call path, E2A inside), :mod:`~gateways.mcp.results` (a task's frames -> MCP
progress and result), :mod:`~gateways.mcp.server` (the MCP server), :mod:`~gateways.mcp.command`
(the command). Documented in docs/mcp.md.
"""
