"""Large catalogues: what the model sees when there are many MCP tools.

Up to ``mcp.tool_search_threshold`` MCP tools, each is offered like any other tool (to the
model directly, and listed in ``execute_code``'s description). Above it, the model is given
no MCP tool directly; ``execute_code``'s description names each server with its tool count
and a few of its tools, and a script finds the rest with ``search_tools(query)`` and
``describe_tool(name)`` from ``hermes_tools`` (the full typed functions are in the stub
either way). The model-facing catalogue then stays small however many tools there are.

Standard library only: nothing here needs the MCP SDK.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from execengine.mcp.names import server_of_toolset

if TYPE_CHECKING:
    from execengine.registry import DefinitionContext, ToolRegistry

#: tool names shown per server in search mode
EXAMPLES_PER_SERVER = 3


def mcp_tools(registry: ToolRegistry, names: Iterable[str]) -> dict[str, list[str]]:
    """``{server: [tool names]}`` for the MCP tools among ``names``."""
    out: dict[str, list[str]] = {}
    for name in sorted(names):
        if name not in registry:
            continue
        server = server_of_toolset(registry.get(name).toolset)
        if server is not None:
            out.setdefault(server, []).append(name)
    return out


def search_mode(registry: ToolRegistry, names: Iterable[str]) -> bool:
    count = sum(len(v) for v in mcp_tools(registry, names).values())
    return count > registry.config.mcp.tool_search_threshold


def withhold_in_search_mode(schema: dict[str, Any],
                            dctx: DefinitionContext) -> dict[str, Any] | None:
    """Schema patch of every MCP tool: withheld from the model in search mode (scripts
    still get it: their stub is built with ``purpose="script"``)."""
    if getattr(dctx, "purpose", "model") == "model" and search_mode(dctx.registry,
                                                                    dctx.available):
        return None
    return schema


def summary_lines(registry: ToolRegistry, names: Iterable[str]) -> list[str]:
    """execute_code's lines for the MCP tools in search mode."""
    groups = mcp_tools(registry, names)
    total = sum(len(v) for v in groups.values())
    lines = [f"MCP tools ({total}, from {len(groups)} server(s)) are too many to list: find "
             "them from the script with search_tools(query) (name and summary of the best "
             "matches) and describe_tool(name) (signature and full doc), then call them as "
             "functions (from hermes_tools import <name>) or as mcp.<server>.<tool>(...)."]
    for server, members in groups.items():
        shown = ", ".join(members[:EXAMPLES_PER_SERVER])
        more = f", ... ({len(members)} tools)" if len(members) > EXAMPLES_PER_SERVER else ""
        lines.append(f"- server {server}: {shown}{more}")
    return lines
