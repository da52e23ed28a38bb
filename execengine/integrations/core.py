"""What every framework integration shares: a framework's tools as ``hermes_tools``.

A framework integration describes each of the framework's tools as a :class:`ForeignTool`
(its name, description, JSON schema of its arguments, and how to call it) and hands the
list to a :class:`ToolBridge`. The bridge registers them, script-callable, on a
:class:`~execengine.ToolRegistry` of their own (or on the registry of an engine it is
given), runs scripts on an :class:`~execengine.Engine` configured by execengine's
:class:`~execengine.Config` (isolation level, limits, sessions), and answers with the usual
:class:`~execengine.ExecutionResult`.

- Names become Python identifiers (``get-weather`` is ``get_weather``; a clash or a keyword
  gets a suffix); :attr:`ToolBridge.names` maps them back. Descriptions and parameter docs
  become the stub's docstrings.
- A tool's result goes to the script as the framework returned it: a string as it is (the
  script decodes it when it is JSON), anything else as JSON (pydantic models and dataclasses
  as their fields).
- A tool that raises gives the script what a built-in tool that raises gives:
  ``{"error": "Tool execution failed: <Type>: <message>"}``.
- An async tool called from a script run by :meth:`ToolBridge.aexecute` runs on the caller's
  event loop (where the framework's clients live); from :meth:`ToolBridge.execute`, on
  execengine's own loop.

The bridge is the host: it runs the scripts it is given, so execengine's whole-script
approval (``approvals.execute_code``) is not applied (as for any direct
:meth:`~execengine.Engine.execute`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import inspect
import keyword
import secrets
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from execengine.config import Config, load_config
from execengine.context import ToolContext
from execengine.engine.core import Engine
from execengine.engine.result import ExecutionResult
from execengine.engine.stub import stub_function
from execengine.errors import IntegrationError, MissingExtraError, SandboxError
from execengine.mcp.names import sanitize
from execengine.policy import ToolPolicy
from execengine.registry import ToolRegistry

#: names the stub module keeps for itself (see execengine.engine.stub), never a tool's
_RESERVED = frozenset({"aio", "mcp", "ToolCallError", "json_parse", "shell_quote", "retry",
                       "search_tools", "describe_tool", "execute_code"})
MAX_NAME = 64
EMPTY_PARAMETERS: Mapping[str, Any] = {"type": "object", "properties": {}}


def missing_extra(framework: str, extra: str, exc: ImportError) -> MissingExtraError:
    """The error for an integration whose framework is not installed."""
    return MissingExtraError(
        f"the {framework} integration needs its extra: pip install 'execengine[{extra}]' "
        f"({exc})")


@dataclass(frozen=True)
class ForeignTool:
    """One tool of a framework, as a script will call it.

    ``call(args, context)`` runs the tool synchronously (it may also return an awaitable);
    ``acall(args, context)`` is its coroutine form. At least one is given; when both are,
    scripts run by :meth:`ToolBridge.aexecute` use ``acall`` and the others ``call``.
    ``context`` is what the framework gave the ``execute_code`` call that runs the script
    (its run context, config...), as passed to :meth:`ToolBridge.execute`; None otherwise.
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = dataclasses.field(default_factory=lambda: EMPTY_PARAMETERS)
    call: Callable[[dict[str, Any], Any], Any] | None = None
    acall: Callable[[dict[str, Any], Any], Awaitable[Any]] | None = None
    #: the toolset to register it in (default: the bridge's); ``mcp-<server>`` groups a
    #: tool as ``mcp.<server>.<tool>`` in the stub
    toolset: str | None = None

    def __post_init__(self) -> None:
        if self.call is None and self.acall is None:
            raise IntegrationError(f"tool {self.name!r}: give call or acall")


def script_name(name: str, taken: Iterable[str] = ()) -> str:
    """``name`` as a Python identifier a stub can define, not one of ``taken``."""
    base = sanitize(name)
    if base[0].isdigit():
        base = f"tool_{base}"
    if keyword.iskeyword(base) or base in _RESERVED or base.startswith("_"):
        base = f"{base.strip('_') or 'tool'}_tool"
    base = base[:MAX_NAME]
    used = set(taken)
    candidate, n = base, 2
    while candidate in used:
        suffix = f"_{n}"
        candidate, n = base[:MAX_NAME - len(suffix)] + suffix, n + 1
    return candidate


def parameters_schema(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """A framework's argument schema as a registry accepts it (an object schema)."""
    params = dict(schema or {})
    params.setdefault("type", "object")
    if params["type"] == "object":
        params.setdefault("properties", {})
    return params


def jsonable(value: Any) -> Any:
    """A tool result the dispatcher can send as JSON: pydantic models and dataclasses as
    their fields, tuples and sets as lists; anything else as it is (strings pass as they
    are; what JSON cannot hold is sent as its ``str``)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    return value


class ToolBridge:
    """A framework's tools, callable from scripts that execengine runs.

    ``config`` (default: :func:`~execengine.load_config`) sets the isolation level and the
    limits; or pass ``engine``, an engine of yours, and the tools are registered on its
    registry (in ``toolset``) and taken away again by :meth:`close`. ``session``: a name to
    run every script as a cell of that persistent session (variables stay between calls;
    ``reset=True`` starts it fresh); None runs each script on its own.

    A context manager; :meth:`close` is idempotent and closes the engine the bridge made.
    """

    def __init__(self, tools: Iterable[ForeignTool], *, config: Config | None = None,
                 engine: Engine | None = None, toolset: str = "integration",
                 session: str | None = None) -> None:
        self.toolset = toolset
        self.session = session
        self._own_engine = engine is None
        self._engine = engine
        self.config = engine.config if engine is not None else (config or load_config())
        self.registry = engine.registry if engine is not None else ToolRegistry(
            self.config, toolsets=())
        self._lock = threading.Lock()
        self._closed = False
        #: execution (task id) -> the framework's context of the call, the event loop its
        #: async tools run on, and their futures
        self._contexts: dict[str, Any] = {}
        self._loops: dict[str, asyncio.AbstractEventLoop] = {}
        self._pending: dict[str, set[concurrent.futures.Future[Any]]] = {}
        #: script name -> the framework's name
        self.names: dict[str, str] = {}
        self._toolsets: set[str] = {toolset}
        self.add(tools)

    def add(self, tools: Iterable[ForeignTool]) -> list[str]:
        """Register more tools; their script names (a name already taken gets a suffix)."""
        added = []
        with self._lock:
            taken = set(self.registry.names())
            for tool in tools:
                name = script_name(tool.name, taken)
                taken.add(name)
                toolset = tool.toolset or self.toolset
                self.registry.register(
                    name, toolset, {"description": tool.description or "",
                                    "parameters": parameters_schema(tool.parameters)},
                    self._handler(tool), policy=ToolPolicy(script_callable=True),
                    source=f"integration:{self.toolset}")
                self.names[name] = tool.name
                self._toolsets.add(toolset)
                added.append(name)
        return added

    # -- what the model is told ------------------------------------------------------

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of ``execute_code``'s arguments."""
        props: dict[str, Any] = {"code": {
            "type": "string",
            "description": "Python source to run. Import the tools you need from "
                           "hermes_tools and print() what you want to see."}}
        if self.session is not None:
            props["reset"] = {"type": "boolean", "default": False,
                              "description": "Forget the variables and imports earlier "
                                             "calls left behind before running."}
        return {"type": "object", "properties": props, "required": ["code"]}

    def description(self) -> str:
        """``execute_code``'s description: the tools with their signatures, the limits."""
        ce = self.config.code_execution
        lines = [
            "Run a Python script that calls tools programmatically and return what it "
            "prints. Use it to chain many tool calls, loop, filter and aggregate without "
            "putting every intermediate result in the conversation.",
            "",
            "Functions in `hermes_tools` (`from hermes_tools import <name>`); each returns "
            "the tool's result (JSON decoded), a failing tool returns {\"error\": ...}:",
        ]
        for name in sorted(self.names):
            entry = self.registry.get(name)
            fn = stub_function(name, entry.schema)
            doc = entry.description.strip().split("\n", 1)[0][:160]
            lines.append(f"- {name}({fn.signature})" + (f": {doc}" if doc else ""))
        state = ("Variables and imports persist between calls (reset=true starts fresh)."
                 if self.session is not None else "Each call starts a fresh interpreter.")
        lines += ["", f"Limits: {ce.timeout:g}s wall time; {ce.max_tool_calls} tool calls; "
                      f"stdout kept to {ce.max_stdout_bytes:,} bytes. {state}"]
        return "\n".join(lines)

    # -- running ---------------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        """The engine scripts run on (made on first use)."""
        with self._lock:
            if self._closed:
                raise SandboxError("this tool bridge is closed")
            if self._engine is None:
                self._engine = Engine(self.config, self.registry)
            return self._engine

    def execute(self, code: str, *, reset: bool = False, context: Any = None,
                interrupt: threading.Event | None = None, **options: Any) -> ExecutionResult:
        """Run ``code``; the tools it calls get ``context`` (async tools run on execengine's
        loop). ``options``: ``session`` (instead of the bridge's), ``tools`` (script names:
        only these), ``cwd``."""
        task_id = self._task_id()
        with self._lock:
            self._contexts[task_id] = context
        try:
            return self.engine.execute(code, **self._run_args(task_id, reset, interrupt,
                                                              **options))
        finally:
            self._forget(task_id)

    async def aexecute(self, code: str, *, reset: bool = False, context: Any = None,
                       **options: Any) -> ExecutionResult:
        """Run ``code`` from asyncio; the tools it calls get ``context``, and async ones run
        on this loop. Cancelling the awaiting task stops the script. ``options``: as for
        :meth:`execute`."""
        task_id = self._task_id()
        with self._lock:
            self._contexts[task_id] = context
            self._loops[task_id] = asyncio.get_running_loop()
        try:
            return await self.engine.aexecute(code, **self._run_args(task_id, reset, None,
                                                                     **options))
        finally:
            self._forget(task_id)

    def _run_args(self, task_id: str, reset: bool, interrupt: threading.Event | None, *,
                  session: str | None = None, tools: Iterable[str] | None = None,
                  cwd: str | None = None) -> dict[str, Any]:
        with self._lock:
            names = list(self.names) if tools is None else [t for t in tools
                                                            if t in self.names]
            toolsets = sorted(self._toolsets)
        args: dict[str, Any] = {"task_id": task_id, "enabled_toolsets": toolsets,
                                "tools": names, "cwd": cwd}
        if interrupt is not None:
            args["interrupt"] = interrupt
        session = session if session is not None else self.session
        if session is not None:
            args.update(session=session, reset=reset)
        return args

    @staticmethod
    def _task_id() -> str:
        return f"integration-{secrets.token_hex(6)}"

    def _forget(self, task_id: str) -> None:
        with self._lock:
            self._contexts.pop(task_id, None)
            self._loops.pop(task_id, None)
            pending = self._pending.pop(task_id, set())
        for future in pending:  # a call the script left behind must not outlive it
            future.cancel()

    def _handler(self, tool: ForeignTool) -> Callable[[dict[str, Any], ToolContext], Any]:
        def handle(args: dict[str, Any], ctx: ToolContext) -> Any:
            task_id = ctx.task_id or ""
            with self._lock:
                loop = self._loops.get(task_id)
                context = self._contexts.get(task_id)
            if tool.acall is not None and (loop is not None or tool.call is None):
                coro = tool.acall(args, context)
                if loop is None:
                    return _converted(coro)  # the dispatcher runs it on execengine's loop
                future = asyncio.run_coroutine_threadsafe(_converted(coro), loop)
                with self._lock:
                    self._pending.setdefault(task_id, set()).add(future)
                try:
                    return future.result()
                finally:
                    with self._lock:
                        self._pending.get(task_id, set()).discard(future)
            assert tool.call is not None
            value = tool.call(args, context)
            if inspect.isawaitable(value):
                return _converted(value)
            return jsonable(value)

        return handle

    # -- lifetime ----------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            engine, self._engine = self._engine, None
        if self._own_engine:
            if engine is not None:
                engine.close()
            self.registry.close()
        else:
            for name in self.names:
                self.registry.unregister(name)

    def __enter__(self) -> ToolBridge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _converted(value: Awaitable[Any]) -> Any:
    return jsonable(await value)
