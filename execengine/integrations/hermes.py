"""Hermes Agent: a plugin whose ``execute_code`` runs on execengine.

Installed with the ``hermes`` extra, execengine declares this module in Hermes' plugin
entry-point group (``hermes_agent.plugins``, name ``execengine``). Hermes loads a pip
plugin only when its config enables it, and lets it replace a built-in tool only when the
operator allows that, so ``~/.hermes/config.yaml`` says both::

    plugins:
      enabled: [execengine]
      entries:
        execengine:
          allow_tool_override: true

Then the model's ``execute_code`` (toolset ``code_execution``, Hermes' own schema) runs the
script on execengine: at the isolation level and limits of execengine's config
(``$EXECENGINE_CONFIG`` or ``~/.execengine/config.yaml``), as a cell of a persistent
session per Hermes session (variables stay between calls), with the hermes_tools the
session enabled: Hermes' script tools (``web_search`` ... ``terminal``) and its MCP tools
(also as ``mcp.<server>.<tool>``). Every call a script makes is dispatched by Hermes itself
(``model_tools.handle_function_call``: its hooks, middleware and approvals apply), and its
JSON result goes back to the script. The whole script is approved by Hermes' own guard, as
its built-in tool does. Differences from the built-in: docs/integrations/hermes.md.

Hermes is imported only inside :func:`register` (and what it sets up): this module imports
with or without Hermes installed.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import json
import logging
import os
import threading
from typing import Any

from execengine.config import Config, load_config
from execengine.engine.result import no_code_result
from execengine.errors import SchemaError
from execengine.integrations.core import ForeignTool, ToolBridge
from execengine.mcp.names import TOOLSET_PREFIX
from execengine.schema import check_parameters_schema

log = logging.getLogger(__name__)

NAME = "execute_code"
TOOLSET = "code_execution"
#: terminal parameters scripts never get (foreground only), as in the built-in tool
TERMINAL_HIDDEN = frozenset({"background", "pty", "notify_on_complete", "watch_patterns"})
#: how often the waiting Hermes thread looks at its interrupt flag, seconds
INTERRUPT_POLL = 0.05
UNAVAILABLE = ("execute_code is unavailable in this session: none of the tools a script may "
               "call ({tools}) is enabled. Use normal tool calls instead.")


def register(ctx: Any) -> None:
    """Hermes' plugin hook: replace ``execute_code`` with execengine's."""
    from tools.code_execution_tool import EXECUTE_CODE_SCHEMA, check_sandbox_requirements

    plugin = HermesCodeExecution(load_config())
    atexit.register(plugin.close)
    ctx.register_tool(NAME, TOOLSET, EXECUTE_CODE_SCHEMA, plugin.handle,
                      check_fn=check_sandbox_requirements, emoji="🐍", override=True)


class HermesCodeExecution:
    """The plugin's state: one engine for the process, one session per Hermes session."""

    def __init__(self, config: Config) -> None:
        self.bridge = ToolBridge([], config=config, toolset="hermes")
        self._lock = threading.Lock()

    def close(self) -> None:
        self.bridge.close()

    def handle(self, args: dict[str, Any], **kw: Any) -> str:
        """The ``execute_code`` handler Hermes' registry calls (``task_id``,
        ``session_id`` and ``enabled_tools`` come as keywords)."""
        from tools.approval import check_execute_code_guard

        code = args.get("code")
        if not isinstance(code, str) or not code.strip():
            return no_code_result().to_json()
        task_id = kw.get("task_id")
        names = self._script_tools(kw.get("enabled_tools"))
        if not names:
            from tools.code_execution_tool import SANDBOX_ALLOWED_TOOLS

            return json.dumps({"status": "error", "error": UNAVAILABLE.format(
                tools=", ".join(sorted(SANDBOX_ALLOWED_TOOLS)))})
        guard = check_execute_code_guard(code, "local")
        if not guard.get("approved", False):
            return json.dumps({"status": "error", "tool_calls_made": 0, "duration_seconds": 0,
                               "error": guard.get("message")
                               or "execute_code blocked by approval guard."},
                              ensure_ascii=False)
        session = str(kw.get("session_id") or task_id or "default")
        call = {"task_id": task_id, "session_id": kw.get("session_id")}
        return self._run(code, bool(args.get("reset")), call, session, names,
                         _session_cwd(task_id))

    def _run(self, code: str, reset: bool, call: dict[str, Any], session: str,
             names: list[str], cwd: str | None) -> str:
        """Run on a worker thread while this (Hermes') thread watches its interrupt flag:
        Hermes interrupts a tool by flagging the thread that runs it."""
        from tools.interrupt import is_interrupted

        stop = threading.Event()
        with concurrent.futures.ThreadPoolExecutor(1, "execengine-hermes") as pool:
            future = pool.submit(self.bridge.execute, code, reset=reset, context=call,
                                 interrupt=stop, session=session, tools=names, cwd=cwd)
            while True:
                try:
                    return future.result(timeout=INTERRUPT_POLL).to_json()
                except concurrent.futures.TimeoutError:
                    if is_interrupted():
                        stop.set()

    def _script_tools(self, enabled: Any) -> list[str]:
        """The enabled tools a script may call (fail closed: none enabled, none callable),
        registered on the bridge the first time they are seen."""
        from tools.code_execution_tool import SANDBOX_ALLOWED_TOOLS
        from tools.registry import registry

        wanted = []
        for name in sorted(set(enabled or ())):
            toolset = registry.get_toolset_for_tool(name) or ""
            if name in SANDBOX_ALLOWED_TOOLS or toolset.startswith(TOOLSET_PREFIX):
                wanted.append((name, toolset))
        with self._lock:
            new = [_foreign(name, toolset, registry.get_schema(name) or {})
                   for name, toolset in wanted if name not in self.bridge.names]
            if new:
                self.bridge.add(new)
        return [name for name, _ in wanted]


def _foreign(name: str, toolset: str, schema: dict[str, Any]) -> ForeignTool:
    params = dict(schema.get("parameters") or {"type": "object", "properties": {}})
    if name == "terminal":
        params["properties"] = {k: v for k, v in (params.get("properties") or {}).items()
                                if k not in TERMINAL_HIDDEN}
        params["required"] = [r for r in params.get("required") or []
                              if r not in TERMINAL_HIDDEN]
    try:
        check_parameters_schema(name, params)
    except SchemaError:  # a schema Draft 2020-12 refuses: take any object, Hermes checks
        params = {"type": "object", "additionalProperties": True}

    def call(args: dict[str, Any], context: dict[str, Any] | None) -> str:
        from model_tools import handle_function_call

        result: str = handle_function_call(name, args, **(context or {}))
        return result

    return ForeignTool(name, str(schema.get("description") or ""), params, call=call,
                       toolset=toolset if toolset.startswith(TOOLSET_PREFIX) else None)


def _session_cwd(task_id: str | None) -> str | None:
    """Where the script runs in project mode: the session's working directory as Hermes'
    terminal keeps it, else ``$TERMINAL_CWD`` (execengine's default after that)."""
    from tools.terminal_tool import get_session_cwd

    recorded = get_session_cwd(task_id) if task_id else None
    if recorded and os.path.isdir(recorded):
        return str(recorded)
    raw = os.path.expanduser(os.environ.get("TERMINAL_CWD", "").strip())
    return raw if raw and os.path.isdir(raw) else None
