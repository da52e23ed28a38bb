"""Which tools a script may call, and the host-side handler of its calls.

A script may call the tools the session enabled and has available whose policy says
``script_callable`` (see :class:`~execengine.policy.ToolPolicy`). The set is never widened:
an empty intersection stays empty (fail closed). Agent-level tools are never callable, and
parameters a tool's policy hides are removed from the script's stub and refused when a
script sends them anyway. MCP tools are registered script-callable (execengine.mcp).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from execengine.context import CallContext, ToolContext
from execengine.dispatch import dispatch
from execengine.errors import UnknownToolError
from execengine.mcp.names import sanitize, server_of_toolset, short_name
from execengine.registry import ToolRegistry
from execengine.rpc.channel import CallHandler
from execengine.schema import validate_arguments, violations_message


def script_safe(registry: ToolRegistry, name: str) -> bool:
    """True when ``name`` is registered and its policy lets scripts call it."""
    if name not in registry:
        return False
    policy = registry.get(name).policy
    return policy.script_callable and not policy.agent_level


def allowed_tools(registry: ToolRegistry, enabled_toolsets: Iterable[str] | None = None, *,
                  available: Iterable[str] | None = None) -> list[str]:
    """Sorted names callable from scripts this session."""
    names = registry.available_tools(enabled_toolsets) if available is None else available
    return sorted(n for n in set(names) if script_safe(registry, n))


def function_schemas(registry: ToolRegistry, names: Iterable[str],
                     enabled_toolsets: Iterable[str] | None = None, *,
                     available: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The schemas the registry serves to the model, for these tools only, without the
    parameters their policy hides from scripts (``available``: the tools of
    ``enabled_toolsets`` that are available, when the caller has them already)."""
    return [_without(definition["function"],
                     registry.get(definition["function"]["name"]).policy.hidden_params)
            for definition in registry.get_tool_definitions(
                enabled_toolsets, purpose="script", available=available, only=names)]


def tool_groups(registry: ToolRegistry, names: Iterable[str]) -> dict[str, dict[str, str]]:
    """``{server: {short name: tool name}}`` for the MCP tools among ``names`` (the stub's
    ``mcp.<server>.<tool>`` namespace)."""
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


def _without(fn: dict[str, Any], hidden: frozenset[str]) -> dict[str, Any]:
    if not hidden:
        return fn
    params = dict(fn.get("parameters") or {})
    params["properties"] = {k: v for k, v in (params.get("properties") or {}).items()
                            if k not in hidden}
    if "required" in params:
        params["required"] = [p for p in params["required"] if p not in hidden]
    return {**fn, "parameters": params}


def script_call_handler(registry: ToolRegistry, context: CallContext) -> CallHandler:
    """Dispatch a script's call through the normal dispatcher (hooks, approval, caps).

    Every call goes out with ``context`` and origin ``execute_code``. A tool that is not
    callable from scripts, a hidden parameter, or arguments that do not fit the tool's
    schema (wrong types, unknown fields...) are refused before dispatch, with the same
    message the model gets for its own calls.
    """
    context = context.replace(origin="execute_code")
    # one handler context for every call of the execution (the same fields each time)
    tool_context = ToolContext(registry, registry.config, context)

    def handle(tool: str, args: dict[str, Any]) -> str:
        # one registry lookup per call (this runs for every call of every script)
        try:
            entry = registry.get(tool)
        except UnknownToolError:
            entry = None
        if entry is None or not entry.policy.script_callable or entry.policy.agent_level:
            return json.dumps({"error": f"{tool} is not callable from execute_code scripts"})
        hidden = entry.policy.hidden_params
        used = sorted(p for p in hidden if p in args) if hidden else None
        if used:
            return json.dumps({"error": f"{tool} from execute_code does not take "
                                        f"{', '.join(used)}: not allowed from scripts"})
        violations = validate_arguments(entry.parameters, args)
        if violations:
            return json.dumps({"error": violations_message(tool, violations)})
        return dispatch(registry, tool, args, context, entry=entry, ctx=tool_context)

    return handle
