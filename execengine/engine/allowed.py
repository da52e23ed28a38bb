"""Which tools a script may call, and the host-side handler of its calls.

The allowed set is the intersection of the session's enabled and available tools with the
sandbox allow-list. It is never widened: an empty intersection stays empty (fail closed).
``execute_code`` itself, ``delegate_task``, agent-level tools and MCP tools are never
reachable from a script; ``terminal`` is foreground only.
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
    if name in NEVER or name.startswith("mcp") or name not in registry:
        return False
    entry = registry.get(name)
    if name not in SANDBOX_TOOLS and not entry.policy.script_callable:
        return False
    return not entry.agent_level


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
    for definition in registry.get_tool_definitions(enabled_toolsets):
        fn = definition["function"]
        if fn["name"] in wanted:
            out.append(fn)
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
