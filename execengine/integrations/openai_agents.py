"""OpenAI Agents SDK: ``execute_code`` as a function tool over the agent's other tools.

::

    from execengine.integrations.openai_agents import execute_code_tool

    with execute_code_tool(tools) as code_tool:
        agent = Agent(name="a", tools=[*tools, code_tool])
        result = await Runner.run(agent, "...")

The script calls the agent's :class:`~agents.FunctionTool` s by name (sanitised to
identifiers) with their JSON schemas as signatures. Each call goes through the tool's own
``on_invoke_tool`` with a :class:`~agents.tool_context.ToolContext` of the run (the agent,
the run's context object and usage), and async tools run on the run's event loop. A tool
that raises gives the script ``{"error": "Tool execution failed: <Type>: <message>"}``
(the SDK's default failure message is replaced for calls from scripts; a tool's own
``failure_error_function`` still answers for it). Tools that need approval
(``needs_approval``) and hosted tools are left out: a script cannot stop for approval.
Needs the ``openai-agents`` extra.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
from collections.abc import Iterable
from typing import Any

from execengine.config import Config
from execengine.engine.core import Engine
from execengine.integrations.core import ForeignTool, ToolBridge, missing_extra

try:
    from agents import FunctionTool, RunConfig, ToolOutputText
    from agents.run_config import ToolErrorFormatterArgs
    from agents.tool_context import ToolContext
except ImportError as exc:  # the extra is not installed
    raise missing_extra("OpenAI Agents SDK", "openai-agents", exc) from exc

log = logging.getLogger(__name__)
NAME = "execute_code"


@dataclasses.dataclass
class ExecuteCodeTool(FunctionTool):
    """The ``execute_code`` function tool; :meth:`close` (or ``with``) closes its engine."""

    bridge: ToolBridge | None = dataclasses.field(default=None, kw_only=True, repr=False)

    def close(self) -> None:
        if self.bridge is not None:
            self.bridge.close()

    def __enter__(self) -> ExecuteCodeTool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def execute_code_tool(tools: Iterable[Any], *, config: Config | None = None,
                      engine: Engine | None = None, session: str | None = None,
                      name: str = NAME) -> ExecuteCodeTool:
    """A function tool running scripts that call ``tools`` (the agent's function tools;
    others are left out). ``config`` / ``engine`` / ``session``: see
    :class:`~execengine.integrations.core.ToolBridge`."""
    usable = [t for t in tools if _scriptable(t, name)]
    bridge = ToolBridge([_foreign(t) for t in usable], config=config, engine=engine,
                        toolset="openai-agents", session=session)
    schema = bridge.parameters
    strict = session is None  # strict schemas make every field required
    if strict:
        schema = {**schema, "additionalProperties": False}

    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        args = json.loads(arguments or "{}")
        result = await bridge.aexecute(str(args.get("code") or ""),
                                       reset=bool(args.get("reset")), context=ctx)
        return result.to_json()

    return ExecuteCodeTool(name=name, description=bridge.description(),
                           params_json_schema=schema, on_invoke_tool=invoke,
                           strict_json_schema=strict, bridge=bridge)


def _scriptable(tool: Any, own_name: str) -> bool:
    if not isinstance(tool, FunctionTool) or tool.name == own_name:
        return False
    if tool.needs_approval is not False:
        log.info("tool %s needs approval: not callable from execute_code scripts", tool.name)
        return False
    return True


_call_ids = itertools.count(1)


def _foreign(tool: FunctionTool) -> ForeignTool:
    async def acall(args: dict[str, Any], outer: ToolContext[Any] | None) -> Any:
        raised: list[BaseException] = []

        def keep(info: ToolErrorFormatterArgs[Any]) -> None:
            if info.kind == "tool_exception" and info.error is not None:
                raised.append(info.error)
            return None  # the SDK's message stands in; the error is raised below

        arguments = json.dumps(args)
        # the run's context object, usage and agent, as for the agent's own calls
        run: dict[str, Any] = ({"usage": outer.usage, "agent": outer.agent}
                               if outer is not None else {})
        ctx = ToolContext(
            outer.context if outer is not None else None,
            tool_name=tool.name,
            tool_call_id=f"{outer.tool_call_id if outer is not None else NAME}"
                         f"/script-{next(_call_ids)}",
            tool_arguments=arguments,
            run_config=RunConfig(tool_error_formatter=keep), **run)
        value = await tool.on_invoke_tool(ctx, arguments)
        if raised:
            raise raised[0]
        if isinstance(value, ToolOutputText):
            return value.text
        return value

    return ForeignTool(tool.name, tool.description, tool.params_json_schema, acall=acall)
