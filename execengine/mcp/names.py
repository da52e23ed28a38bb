"""Names of MCP tools in the registry: ``mcp_<server>_<tool>`` in toolset ``mcp-<server>``.

Both parts are sanitised to letters, digits and ``_`` so the name is a valid function name
for the model and in ``hermes_tools``; a name that would pass 64 characters keeps its head
and gets a short hash of the original for uniqueness. Two of a server's tools that sanitise
to the same name are a collision: the first wins, the second is reported.
"""

from __future__ import annotations

import hashlib
import keyword
import re

PREFIX = "mcp_"
TOOLSET_PREFIX = "mcp-"
MAX_NAME = 64
_BAD = re.compile(r"[^A-Za-z0-9_]+")


def sanitize(part: str) -> str:
    """``part`` with every run of other characters replaced by ``_`` (never empty)."""
    cleaned = _BAD.sub("_", part).strip("_")
    return cleaned or "_"


def toolset_name(server: str) -> str:
    return f"{TOOLSET_PREFIX}{server}"


def tool_name(server: str, tool: str) -> str:
    """The registry name of ``tool`` served by ``server``."""
    name = f"{PREFIX}{sanitize(server)}_{sanitize(tool)}"
    if len(name) > MAX_NAME:
        digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
        name = f"{name[:MAX_NAME - 9]}_{digest}"
    return name


def short_name(server: str, full: str) -> str | None:
    """The attribute under ``mcp.<server>`` in the stub, or None when it cannot be one."""
    head = f"{PREFIX}{sanitize(server)}_"
    if not full.startswith(head):
        return None
    short = full[len(head):]
    if not short.isidentifier() or keyword.iskeyword(short):
        return None
    return short


def server_of_toolset(toolset: str) -> str | None:
    return toolset[len(TOOLSET_PREFIX):] if toolset.startswith(TOOLSET_PREFIX) else None
