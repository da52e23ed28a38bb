"""One execution, decided before anything starts: the :class:`ExecutionPlan`.

:meth:`Engine.execute <execengine.engine.core.Engine.execute>` builds a plan with
:func:`make_plan`, in this one place, whatever runs it: a one-shot child
(:mod:`.oneshot`) or a cell of a session's kernel (:mod:`.sessions`). The plan holds what
the caller asked for, checked (code, mode, timeout, tools, working directory), and what
follows from the engine's configuration (the interpreter, the tools a script may call and
the ``hermes_tools`` stub rendered from their schemas, MCP servers' groups included). What
the runners then make of it (a policy, a channel, a child) and how a result is worded is
shared too (:mod:`.prepare`, :func:`execengine.engine.result.build_result`).

Which tools a script may call is decided here as well (:func:`allowed_tools`), and so is how
its calls are served: :func:`script_call_handler` refuses what the plan does not allow
before the registry dispatches the rest.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from execengine.childenv import build_child_env
from execengine.config import MODES, Mode, checked_timeout
from execengine.context import CallContext, ToolContext
from execengine.engine.interpreter import choose
from execengine.engine.stub import render_stub
from execengine.errors import ConfigError, InvalidArgumentError, UnknownToolError, did_you_mean
from execengine.mcp.names import sanitize, server_of_toolset, short_name
from execengine.registry import ToolRegistry, dispatch
from execengine.rpc.channel import CallHandler
from execengine.schema import validate_arguments, violations_message

if TYPE_CHECKING:
    from execengine.engine.core import Engine

#: what tracebacks call a script's code by default, and the name of a model's code: never
#: the staging copy's path (see :data:`.prepare.SCRIPT_NAME_VAR`)
SCRIPT_NAME = "<execute_code>"
#: the context of a caller that gave none (frozen: one serves every plan)
NO_CONTEXT = CallContext()
#: how long an engine reuses what a plan takes from its registry (see :class:`Templates`)
TEMPLATE_TTL = 1.0


@dataclass(frozen=True)
class ExecutionPlan:
    """What one execution runs, with what, where and for how long."""

    code: str
    mode: Mode
    #: the interpreter that runs the script (or the session's kernel)
    interpreter: str
    #: the wall-clock limit in seconds
    timeout: float
    #: the tools the script may call, sorted; its stub offers exactly these
    tools: tuple[str, ...]
    #: the ``hermes_tools`` module the script imports
    stub: str
    #: the caller's context of the script's tool calls; :func:`.prepare.script_context`
    #: adds the task and cwd below and the execution's own fields (policy, interrupt,
    #: launcher) when the first call arrives (most scripts make none)
    call: CallContext
    #: the calls' task: the caller's, else the context's
    task_id: str | None
    #: the calls' cwd: the caller's, else the context's (None: the policy decides it)
    cwd: str | None
    #: set from another thread to stop the script
    interrupt: threading.Event | None
    #: the folder the script runs in; "" in strict mode (a private folder per run)
    workdir: str
    #: the child's environment before the execution's own variables: the host's
    #: allow-listed ones and those passed through by name (``terminal.env_passthrough``,
    #: skills), see :func:`execengine.childenv.build_child_env`
    env: Mapping[str, str] = field(default_factory=dict)
    #: the session whose kernel runs it (None: a one-shot child)
    session: str | None = None
    #: start the session's kernel afresh first
    reset: bool = False
    #: what tracebacks call a one-shot script's code (the CLI's file name, or
    #: ``<execute_code>``); a session's cells are ``<cell N>``
    filename: str = SCRIPT_NAME

    @property
    def has_code(self) -> bool:
        return bool(self.code.strip())


def make_plan(
    engine: Engine,
    code: str,
    *,
    task_id: str | None = None,
    cwd: str | None = None,
    enabled_toolsets: Iterable[str] | None = None,
    tools: Iterable[str] | None = None,
    interrupt: threading.Event | None = None,
    timeout: float | None = None,
    mode: str | None = None,
    context: CallContext | None = None,
    session: str | None = None,
    reset: bool = False,
    filename: str | None = None,
) -> ExecutionPlan:
    """The plan of :meth:`Engine.execute`'s arguments; raises for arguments that are wrong
    (:class:`InvalidArgumentError`, :class:`ConfigError`, :class:`UnknownToolError`), never
    for what the script will do."""
    if not isinstance(code, str):
        what = type(code).__name__
        hint = " (decode it first, e.g. code.decode('utf-8'))" if isinstance(
            code, (bytes, bytearray)) else ""
        raise InvalidArgumentError(f"code must be a str of Python source, got {what}{hint}")
    ce = engine.config.code_execution
    chosen = mode or ce.mode
    if chosen not in MODES:
        raise ConfigError(f"unknown mode {chosen!r}; expected one of "
                          f"{', '.join(map(repr, MODES))}", key="code_execution.mode")
    limit = ce.timeout if timeout is None else checked_timeout(timeout)
    call = context or NO_CONTEXT
    if interrupt is None:
        interrupt = call.interrupt  # the context's: "execute_code stops its script"
    task_id = task_id if task_id is not None else call.task_id
    cwd = cwd or call.cwd
    if cwd:
        cwd = os.path.abspath(cwd)
        why = engine.host.folder_problem(cwd)
        if why is not None:
            raise InvalidArgumentError(f"cwd {cwd!r} {why}: an execution runs in a folder")
    made = engine.templates.get(engine, enabled_toolsets, tools, chosen)
    workdir = "" if chosen == "strict" else (cwd or engine.task_dir(task_id))
    return ExecutionPlan(
        code=code, mode=chosen, interpreter=made.interpreter,
        timeout=limit, tools=made.tools, stub=made.stub,
        call=call, task_id=task_id, cwd=cwd or None,
        interrupt=interrupt, workdir=workdir, env=made.env,
        session=session, reset=reset,
        filename=filename or SCRIPT_NAME)


@dataclass(frozen=True)
class Template:
    """What a plan takes from the registry, the configuration and the host's environment:
    the tools a script may call, their stub, the interpreter, the child's environment."""

    tools: tuple[str, ...]
    stub: str
    interpreter: str
    env: Mapping[str, str]


class Templates:
    """An engine's templates, reused for :data:`TEMPLATE_TTL` seconds: the availability
    checks behind them (environment variables, folders, API keys) are seen within it; a
    change of the registry's tools (``registry.generation``) or of the environment at
    once. Building one runs every tool's availability check and copies its schema, most of
    the host's work for a trivial execution."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[tuple[object, ...], tuple[float, Template]] = {}

    def get(self, engine: Engine, enabled_toolsets: Iterable[str] | None,
            tools: Iterable[str] | None, mode: str) -> Template:
        key = (engine.registry.generation, _names(enabled_toolsets), _names(tools), mode,
               hash(frozenset(os.environ.items())))
        now = time.monotonic()
        with self._lock:
            found = self._made.get(key)
        if found is not None and found[0] > now:
            return found[1]
        made = _template(engine, enabled_toolsets, tools, mode)
        with self._lock:
            if len(self._made) > 64:  # a caller cycling through tool sets
                self._made.clear()
            self._made[key] = (now + TEMPLATE_TTL, made)
        return made


def _names(value: Iterable[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    return (value,) if isinstance(value, str) else tuple(value)


def _template(engine: Engine, enabled_toolsets: Iterable[str] | None,
              tools: Iterable[str] | None, mode: str) -> Template:
    registry = engine.registry
    # the availability checks run once: for the names and for their schemas
    available = registry.available_tools(enabled_toolsets)
    if tools is not None:
        tools = _known(registry, tools)
        up = set(available)
        available = [t for t in tools if t in up]
    names = allowed_tools(registry, available=available)
    stub = render_stub(function_schemas(registry, names, enabled_toolsets, available=available),
                       groups=tool_groups(registry, names))
    ce = engine.config.code_execution
    env = build_child_env(os.environ, passthrough=registry.env_passthrough, tz=ce.tz)
    return Template(tuple(names), stub, choose(mode, configured=ce.python),
                    MappingProxyType(env))


def _known(registry: ToolRegistry, tools: Iterable[str]) -> list[str]:
    """``tools`` as a list; :class:`UnknownToolError` naming the known tools for any
    name no tool of the registry has."""
    if isinstance(tools, str):
        tools = [tools]
    names = list(tools)
    known = sorted(registry.names())
    unknown = [n for n in names if n not in set(known)]
    if unknown:
        first = unknown[0]
        raise UnknownToolError(f"unknown tool {first!r} in tools="
                               f"{did_you_mean(first, known)}; known: {', '.join(known)}")
    return names


# -- the tools a script may call, and the host's side of its calls ----------------------------
#
# A script may call the tools the session enabled and has available whose policy says
# ``script_callable`` (see :class:`~execengine.policy.ToolPolicy`). The set is never widened:
# an empty intersection stays empty (fail closed). Agent-level tools are never callable, and
# parameters a tool's policy hides are removed from the script's stub and refused when a
# script sends them anyway. MCP tools are registered script-callable (execengine.mcp).

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
