"""MCP both ways (see docs/mcp.md).

- Client: :func:`attach` starts the servers configured under ``mcp_servers:`` and registers
  their tools (``mcp_<server>_<tool>``, toolset ``mcp-<server>``), callable from scripts
  (:mod:`.manager`, one connection per server in :mod:`.connection`, results mapped in
  :mod:`.results`, names in :mod:`.names`, large catalogues in :mod:`.catalogue`).
- Server: :mod:`.server` serves ``execute_code`` (and optionally the tools) over stdio or
  streamable HTTP: ``execengine mcp``.

The MCP SDK is the optional extra ``execengine[mcp]``; importing this package does not
import it (only starting a server or a connection does).
"""

from __future__ import annotations

from execengine.mcp.connection import ServerStatus
from execengine.mcp.manager import McpManager, attach

__all__ = ["McpManager", "ServerStatus", "attach"]
