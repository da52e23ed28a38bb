"""smolagents: a ``CodeAgent`` executor whose code runs in execengine's sandbox.

::

    from execengine.integrations.smolagents import ExecengineExecutor

    with CodeAgent(tools=tools, model=model, executor=ExecengineExecutor()) as agent:
        agent.run("...")

Each step's code runs as a cell of one execengine session (variables and imports stay from
step to step, as with smolagents' own executor), at the isolation level and limits of
execengine's config. The agent's tools (and managed agents) stay on the host: the code
calls them by their bare names, as smolagents' prompts tell the model to, and each call
crosses the RPC to ``tool(**kwargs)`` on the host (an ``async def forward`` is awaited).
``final_answer(x)`` ends the step with ``x`` as the answer. What crosses between the code
and the host is JSON (a tool's result, the final answer, ``agent.state`` variables; what
JSON cannot hold goes as its ``str``). Needs the ``smolagents`` extra.
"""

from __future__ import annotations

import json
import logging
import secrets
import textwrap
import threading
from typing import Any

from execengine.config import Config
from execengine.engine.core import Engine
from execengine.integrations.core import ForeignTool, ToolBridge, missing_extra

try:
    from smolagents.local_python_executor import CodeOutput, InterpreterError, PythonExecutor
    from smolagents.tools import Tool
except ImportError as exc:  # the extra is not installed
    raise missing_extra("smolagents", "smolagents", exc) from exc

log = logging.getLogger(__name__)
FINAL = "final_answer"
#: smolagents' input types as JSON schema types (image, audio, any: unchecked)
_TYPES = {"string": "string", "boolean": "boolean", "integer": "integer",
          "number": "number", "array": "array", "object": "object", "null": "null"}

#: runs before each step's code, in the session: the tools under their bare names, a
#: final_answer that stops the step, then the step's code itself (its own line numbers)
CELL = textwrap.dedent('''\
    from hermes_tools import {imports}
    class _ExecengineFinalAnswer(BaseException):
        pass
    def final_answer(answer):
        _execengine_final_answer(answer=answer)
        raise _ExecengineFinalAnswer()
    {variables}
    try:
        exec(compile({code!r}, "<code>", "exec"), globals())
    except _ExecengineFinalAnswer:
        pass
    ''')


class _Step:
    """What one step's final_answer call left on the host."""

    def __init__(self) -> None:
        self.final = False
        self.answer: Any = None


class ExecengineExecutor(PythonExecutor):  # type: ignore[misc]  # smolagents is untyped
    """A smolagents ``PythonExecutor`` running code on execengine. ``config`` /
    ``engine``: see :class:`~execengine.integrations.core.ToolBridge`; ``session``: the
    session's name (default: one of its own). ``cleanup()`` (called by ``CodeAgent``'s
    ``with``) closes the session's engine."""

    def __init__(self, *, config: Config | None = None, engine: Engine | None = None,
                 session: str | None = None) -> None:
        self._options: dict[str, Any] = {"config": config, "engine": engine}
        self.session = session or f"smolagents-{secrets.token_hex(6)}"
        self._lock = threading.Lock()
        self._bridge: ToolBridge | None = None
        self._tools: dict[str, Any] = {}
        self._variables: dict[str, Any] = {}

    @property
    def bridge(self) -> ToolBridge:
        with self._lock:
            if self._bridge is None:
                self._bridge = self._make_bridge()
            return self._bridge

    def send_tools(self, tools: dict[str, Tool]) -> None:
        with self._lock:
            if set(tools) == set(self._tools) and all(
                    tools[n] is self._tools[n] for n in tools):
                return
            self._tools = dict(tools)
            old, self._bridge = self._bridge, None
        if old is not None:
            old.close()  # a new tool set: a new session (smolagents' own starts afresh too)

    def send_variables(self, variables: dict[str, Any]) -> None:
        kept = {}
        for name, value in variables.items():
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                log.info("variable %s is not JSON: not sent to the execengine session", name)
                continue
            if name.isidentifier():
                kept[name] = value
        with self._lock:
            self._variables.update(kept)

    def __call__(self, code_action: str) -> CodeOutput:
        bridge = self.bridge
        with self._lock:
            variables, self._variables = self._variables, {}
        tools = [n for n, original in bridge.names.items() if original != FINAL]
        imports = ", ".join([*tools, "json_parse", f"{FINAL} as _execengine_final_answer"])
        assign = (f"globals().update(json_parse({json.dumps(variables)!r}))"
                  if variables else "")
        step = _Step()
        result = bridge.execute(CELL.format(imports=imports, variables=assign,
                                            code=code_action), context=step)
        if result.status != "success":
            raise InterpreterError(result.output.strip() or result.error or result.status)
        return CodeOutput(output=step.answer if step.final else None, logs=result.output,
                          is_final_answer=step.final)

    def cleanup(self) -> None:
        with self._lock:
            bridge, self._bridge = self._bridge, None
        if bridge is not None:
            bridge.close()

    def _make_bridge(self) -> ToolBridge:
        tools = [_foreign(name, tool) for name, tool in self._tools.items()]
        if FINAL not in self._tools:
            tools.append(ForeignTool(FINAL, "The final answer.", _parameters(
                {"answer": {"type": "any"}}), call=_record(lambda answer: answer)))
        return ToolBridge(tools, toolset="smolagents", session=self.session,
                          **self._options)


def _record(tool: Any) -> Any:
    """final_answer on the host: the tool's value becomes the step's answer."""

    def call(args: dict[str, Any], step: _Step | None) -> Any:
        value = tool(**args)
        if step is not None:
            step.final, step.answer = True, value
        return None

    return call


def _foreign(name: str, tool: Any) -> ForeignTool:
    inputs = getattr(tool, "inputs", {}) or {}
    if name == FINAL:
        return ForeignTool(name, tool.description, _parameters(inputs), call=_record(tool))

    def call(args: dict[str, Any], step: _Step | None) -> Any:
        return tool(**args)

    return ForeignTool(name, getattr(tool, "description", ""), _parameters(inputs),
                       call=call)


def _parameters(inputs: dict[str, Any]) -> dict[str, Any]:
    """A smolagents tool's ``inputs`` as a JSON schema."""
    props: dict[str, Any] = {}
    required = []
    for arg, spec in inputs.items():
        kind = _TYPES.get(spec.get("type"))
        schema: dict[str, Any] = {}
        if kind is not None:
            schema["type"] = [kind, "null"] if spec.get("nullable") else kind
        if spec.get("description"):
            schema["description"] = spec["description"]
        props[arg] = schema
        if not spec.get("nullable"):
            required.append(arg)
    return {"type": "object", "properties": props, "required": required}
