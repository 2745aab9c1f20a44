"""MCP in both directions (needs the ``mcp`` extra: ``pip install "orkeon-actors[mcp]"``).

* :class:`HubToolServer`: the seven agent tools served to any MCP client (Claude
  Desktop, an IDE, another agent framework); ``orkeon mcp`` runs it on a store.
* :func:`mcp_tools`: the tools of an external MCP server (stdio or streamable HTTP) as
  ``Tool`` objects an :class:`~orkeon_actors.crew.Agent` can use.

See ``docs/mcp.md``.
"""

from orkeon_actors.mcp.client_tools import McpServerParams, McpToolset, mcp_tools
from orkeon_actors.mcp.server import HubToolServer

__all__ = ["HubToolServer", "McpServerParams", "McpToolset", "mcp_tools"]
