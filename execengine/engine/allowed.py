"""Which tools a script may call, and the host-side handler of its calls.

The allowed set is the intersection of the session's enabled and available tools with the
sandbox allow-list. It is never widened: an empty intersection stays empty (fail closed).
``execute_code`` itself, ``delegate_task`` and agent-level tools are never reachable from a
script; ``terminal`` is foreground only. MCP tools (toolset ``mcp-<server>``) are.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from execengine.engine.stub import HIDDEN_PARAMS
from execengine.registry import AGENT_LEVEL_TOOLS, ToolRegistry
from execengine.rpc.channel import CallHandler

SANDBOX_TOOLS = frozenset({"web_search", "web_extract", "read_file", "write_file",
                           "search_files", "patch", "terminal"})
NEVER = frozenset({"execute_code", "delegate_task"}) | AGENT_LEVEL_TOOLS


def script_safe(registry: ToolRegistry, name: str) -> bool:
    if name in NEVER or name not in registry:
        return False
    entry = registry.get(name)
    if entry.agent_level:
        return False
    # MCP tools are registered by execengine.mcp in toolsets mcp-<server>
    return name in SANDBOX_TOOLS or (entry.toolset.startswith("mcp-")
                                     and entry.source.startswith("MCP server"))


def allowed_tools(registry: ToolRegistry, enabled_toolsets: Iterable[str] | None = None, *,
                  available: Iterable[str] | None = None) -> list[str]:
    """Sorted names callable from scripts this session."""
    names = registry.available_tools(enabled_toolsets) if available is None else available
    return sorted(n for n in set(names) if script_safe(registry, n))


def function_schemas(registry: ToolRegistry, names: Iterable[str],
                     enabled_toolsets: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The schemas the registry serves to the model, for these tools only."""
    wanted = set(names)
    out = []
    for definition in registry.get_tool_definitions(enabled_toolsets, purpose="script"):
        fn = definition["function"]
        if fn["name"] in wanted:
            out.append(fn)
    return out


def tool_groups(registry: ToolRegistry, names: Iterable[str]) -> dict[str, dict[str, str]]:
    """``{server: {short name: tool name}}`` for the MCP tools among ``names`` (the stub's
    ``mcp.<server>.<tool>`` namespace)."""
    from execengine.mcp.names import sanitize, server_of_toolset, short_name

    out: dict[str, dict[str, str]] = {}
    for name in sorted(names):
        server = server_of_toolset(registry.get(name).toolset) if name in registry else None
        if server is None:
            continue
        short = short_name(server, name)
        attr = sanitize(server)
        if short is not None and attr.isidentifier():
            out.setdefault(attr, {})[short] = name
    return out


def script_call_handler(registry: ToolRegistry, *, task_id: str | None,
                        extras: Mapping[str, Any] | None = None) -> CallHandler:
    """Dispatch a script's call through the normal dispatcher (hooks, approval, caps)."""
    extras = dict(extras or {})

    def handle(tool: str, args: dict[str, Any]) -> str:
        hidden = HIDDEN_PARAMS.get(tool, frozenset())
        used = sorted(p for p in hidden if args.get(p))
        if used:
            return json.dumps({"error": f"{tool} from execute_code is foreground only: "
                                        f"{', '.join(used)} not allowed"})
        return registry.dispatch(tool, args, task_id=task_id, origin="execute_code", **extras)

    return handle
