"""The ``execute_code`` tool's behaviour, bound to an engine.

The tool is registered by :mod:`execengine.tools.code_execution_tool` (toolset
``code_execution``); its handler runs scripts on the engine bound to the registry:
``Engine(config, registry)`` binds itself when the registry's ``execute_code`` has no live
engine (:func:`attach`, one engine per registry) and unbinds when it closes. The registry
holds the tool's handler, not the engine: the handler keeps a weak reference to it.

Its description is written per session by a schema patch from the tools a script could
really call (names and one-line docs), the configured limits and the mode. When no tool is
callable from scripts, or no engine is bound, the tool is withheld (fail closed); called
anyway, it says why. Its arguments are checked against its schema before anything runs.
"""

from __future__ import annotations

import json
import threading
import weakref
from typing import TYPE_CHECKING, Any

from execengine._text import plural
from execengine.approval.gate import persist_approvals
from execengine.approval.script import ScriptScope, ScriptVerdict, check_script
from execengine.context import ToolContext
from execengine.engine.plan import allowed_tools
from execengine.engine.result import (
    NO_CODE,
    ExecutionResult,
    no_code_result,
    refused_result,
)
from execengine.errors import IsolationError, ToolError
from execengine.isolation import detect
from execengine.launch.factory import choose_level
from execengine.mcp.catalogue import mcp_tools, search_mode, summary_lines
from execengine.mcp.names import server_of_toolset
from execengine.registry import DefinitionContext, ToolRegistry
from execengine.schema import validate_arguments, violations_message

if TYPE_CHECKING:
    from execengine.engine.core import Engine

#: the tool's name in every registry
NAME = "execute_code"
#: argument names a model sends the script under by mistake
MISNAMED = frozenset({"command", "script", "source", "python", "cmd"})

SCHEMA = {
    "description": "Run a Python script that calls tools programmatically "
    "(from hermes_tools import ...); only what it prints is returned.",
    "parameters": {
        "type": "object",
        "properties": {
            "code": {
                "type": "string",
                "description": "Python source to run. Import the tools you need from "
                "hermes_tools and print() the results you want to see.",
            },
            "reset": {
                "type": "boolean",
                "default": False,
                "description": "Start from a fresh session: forget the variables, imports "
                "and data earlier calls left behind.",
            },
        },
        "required": ["code"],
    },
}

PARAMETERS: dict[str, Any] = SCHEMA["parameters"]  # type: ignore[assignment]

MODE_TEXT = {
    "project": "the session's working directory with the project's Python "
    "($VIRTUAL_ENV / $CONDA_PREFIX when usable)",
    "strict": "a private temporary directory with the host's Python",
}


#: what each script-callable tool returns, told to the model so its scripts can rely on it
RESULT_SHAPES = {
    "read_file": '{"content": "     1|first line\\n     2|...", "total_lines", "truncated"} '
                 '(each line numbered "N|")',
    "write_file": '{"path", "bytes_written", "lines", "created"}',
    "patch": '{"success", "replacements", "diff"} or {"success": false, "error"}',
    "search_files": '{"matches": [{"path", "line", "content"}], "total_count", "truncated"}; '
                    'target="files": {"files": [path, ...], ...}',
    "terminal": '{"output", "exit_code"}',
    "web_search": '{"data": {"web": [{"url", "title", "description"}]}}',
    "web_extract": '{"results": [{"url", "title", "content"} or {"url", "error"}]} '
                   '(up to 20 URLs a call)',
}


def _first_line(text: str) -> str:
    line = text.strip().split("\n", 1)[0]
    end = line.find(". ")
    return line[: end + 1] if 0 <= end < 160 else line[:160]


def describe(registry: ToolRegistry, names: list[str]) -> str:
    ce = registry.config.code_execution
    mode = ce.mode
    lines = [
        "Run a Python script that calls tools programmatically and return what it prints. "
        "Use it to chain many tool calls, loop, filter and aggregate without putting every "
        "intermediate result in the conversation.",
        "",
        "Available with `from hermes_tools import <name>` (each returns a dict; a tool error "
        "is {\"error\": ...}):",
    ]
    searching = search_mode(registry, names)
    listed = names
    if searching:
        hidden = {n for members in mcp_tools(registry, names).values() for n in members}
        listed = [n for n in names if n not in hidden]
    for name in listed:
        shape = RESULT_SHAPES.get(name)
        lines.append(f"- {name}: {_first_line(registry.get(name).description)}"
                     + (f" Returns {shape}." if shape else ""))
    if searching:
        lines += summary_lines(registry, names)
    lines += [
        "Helpers in hermes_tools: json_parse(text), shell_quote(s), "
        "retry(fn, max_attempts=3, delay=2). Calls are thread-safe and run concurrently; "
        "`from hermes_tools import aio` gives awaitable forms (await aio.<tool>(...)).",
        "",
        f"Limits: {ce.timeout:g}s wall time; {plural(ce.max_tool_calls, 'tool call')}; "
        "stdout kept to "
        f"{ce.max_stdout_bytes:,} bytes (head and tail, the full text spilled to a file); "
        f"stderr kept to {ce.max_stderr_bytes:,} bytes.",
        f"Runs in {MODE_TEXT[mode]}, with a scrubbed environment (no secrets).",
        "State persists between calls in this conversation: variables, imports and loaded "
        "data stay in the session (load a large file once, then query it in later calls); "
        "pass reset=true to start fresh. A timeout or interrupt stops the running call and "
        "keeps the state when it can; processes a call starts are killed when it ends, and "
        f"a session idle for {ce.session_idle_timeout:g}s is closed.",
    ]
    sandbox = _sandbox_text(registry)
    if sandbox:
        lines.append(sandbox)
    if "terminal" in names:
        lines.append("terminal() from a script is foreground only.")
    return "\n".join(lines)


SANDBOX_TEXT = {
    "isolated": "The script is sandboxed: it cannot see host processes, and only its working "
    "directory and /tmp are writable.",
    "restricted": "The script is sandboxed: no network sockets, and only its working "
    "directory and a private temporary directory are writable.",
}


def _sandbox_text(registry: ToolRegistry) -> str:
    """What the isolation level means for a script (the host probe is cached)."""

    ce = registry.config.code_execution
    try:
        level = choose_level(ce.isolation, ce.min_isolation, detect())
    except IsolationError:
        return ""
    text = SANDBOX_TEXT.get(level, "")
    if level == "isolated":
        text += " Network access is " + ("on." if ce.network else "off.")
    return text


def patch_schema(schema: dict[str, Any], dctx: DefinitionContext) -> dict[str, Any] | None:
    if bound_engine(dctx.registry) is None:
        return None  # nothing would run the script
    names = allowed_tools(dctx.registry, available=dctx.available)
    if not names:
        return None  # fail closed: nothing a script could call
    return {**schema, "description": describe(dctx.registry, names)}


def unavailable_reason(registry: ToolRegistry) -> str:
    callable_ = sorted(e.name for e in registry.entries() if e.policy.script_callable)
    return ("execute_code is unavailable in this session: none of the tools a script may "
            f"call ({', '.join(callable_) or 'none registered'}) is enabled and available.")


NO_ENGINE = ("execute_code is unavailable: no Engine is attached to this tool registry "
             "(build one with Engine(config, registry))")


def session_key(ctx: ToolContext) -> str:
    """The session a call's cells run in: the conversation's session id when the host gives
    one (``CallContext.session_id``), else its task id. A delegated sub-agent runs under its
    own id, so it gets its own session and cannot read its parent's."""
    session = ctx.call.session_id
    return str(session) if session else ctx.task_key


def run_tool(engine: Engine, args: dict[str, Any], ctx: ToolContext) -> str:
    """The ``execute_code`` tool on ``engine``: the arguments checked against the tool's
    schema, the whole-script gate, then a cell of the call's session."""
    if ctx.origin == "execute_code":
        return '{"error": "execute_code cannot be called from a script"}'
    problem = argument_problem(args)
    if problem is not None:
        return ExecutionResult("error", error=problem).to_json()
    code: str = args.get("code") or ""
    reset = bool(args.get("reset"))
    if not code.strip() and not reset:  # reset alone is a call of its own
        return no_code_result().to_json()
    call = ctx.call
    names = engine.allowed_tools(call.enabled_toolsets, call.enabled_tools)
    if not names:
        return json.dumps({"status": "error", "error": unavailable_reason(ctx.registry)})
    if code.strip():
        verdict = approve(code, ctx, script_scope(ctx.registry, engine.launcher.level, names))
        if not verdict.allowed:
            return refused_result(verdict.message, "approval").to_json()
    result = engine.execute(
        code,
        session=session_key(ctx),
        reset=reset,
        task_id=call.task_id,
        cwd=call.cwd,
        enabled_toolsets=call.enabled_toolsets,
        tools=call.enabled_tools,
        interrupt=call.interrupt,
        context=call.replace(enabled_toolsets=None, enabled_tools=None, interrupt=None),
    )
    return result.to_json()


def argument_problem(args: dict[str, Any]) -> str | None:
    """What is wrong with ``execute_code``'s arguments, worded for the model; None when
    they fit its schema. The common mistakes get the reference's words: the script sent
    as ``command`` (or missing) is "No code provided.", code that is not text says so."""
    if "code" not in args or args.get("code") is None:
        sent = sorted(k for k in args if k in MISNAMED)
        named = f" Put the script in 'code' (this call sent {sent[0]!r})." if sent else ""
        return NO_CODE + named
    code = args["code"]
    if not isinstance(code, str):
        return (f"'code' must be a string of Python source, got {type(code).__name__}; "
                "send the whole script as one string.")
    violations = validate_arguments(PARAMETERS, args)
    return violations_message("execute_code", violations) if violations else None


def script_scope(registry: ToolRegistry, level: str, names: list[str]) -> ScriptScope:
    """What the gate weighs: the level, and the tools a script may call; MCP tools are
    dispatched like the built-in ones (same hooks and checks), so they count as checked."""
    mcp = tuple(n for n in names if server_of_toolset(registry.get(n).toolset) is not None)
    return ScriptScope(level, tuple(names), also_checked=mcp)


def approve(code: str, ctx: ToolContext, scope: ScriptScope) -> ScriptVerdict:
    """The whole-script gate (:mod:`execengine.approval.script`) with this call's approver,
    classifier and session; an "always" answer is added to approvals.command_allowlist."""

    return check_script(
        code, scope, ctx.config.approvals, ctx.services.approvals,
        session=ctx.task_key, origin=ctx.origin, approver=ctx.call.approver,
        classifier=ctx.call.classifier, persist=lambda key: persist_approvals(ctx, (key,)))


def refused(message: str) -> str:
    """A ``pre_tool_call`` hook's refusal, as an execute_code result (nothing started)."""
    return refused_result(message, "hook").to_json()


class _Bound:
    """The tool's handler on one engine (weakly held: the host owns its engine)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = weakref.ref(engine)

    @property
    def engine(self) -> Engine | None:
        return self._engine()

    def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        engine = self._engine()
        if engine is None:
            return json.dumps({"status": "error", "error": NO_ENGINE})
        return run_tool(engine, args, ctx)


def unbound(args: dict[str, Any], ctx: ToolContext) -> str:
    """The handler while no engine is bound."""
    if ctx.origin == "execute_code":
        return '{"error": "execute_code cannot be called from a script"}'
    return json.dumps({"status": "error", "error": NO_ENGINE})


_binding = threading.Lock()


def bound_engine(registry: ToolRegistry) -> Engine | None:
    """The live engine ``registry``'s ``execute_code`` runs on, if any."""
    if NAME not in registry:
        return None
    handler = registry.get(NAME).handler
    return handler.engine if isinstance(handler, _Bound) else None


def attach(registry: ToolRegistry, engine: Engine) -> None:
    """Bind ``registry``'s ``execute_code`` to ``engine``; :class:`ToolError` when another
    live engine holds it (one engine per registry). Nothing to do without the tool."""
    with _binding:
        if NAME not in registry:
            return
        held = bound_engine(registry)
        if held is not None and held is not engine:
            raise ToolError("this registry's execute_code already runs on another engine; "
                            "close it first (one engine per registry)")
        registry.set_handler(NAME, _Bound(engine))


def detach(registry: ToolRegistry, engine: Engine) -> None:
    """Unbind ``engine`` if it is the bound one (idempotent)."""
    with _binding:
        if NAME in registry and bound_engine(registry) in (engine, None):
            registry.set_handler(NAME, unbound)
