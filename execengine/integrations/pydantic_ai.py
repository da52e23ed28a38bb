"""PydanticAI: a toolset exposing ``execute_code`` over the agent's tools.

::

    from execengine.integrations.pydantic_ai import execengine_toolset

    with execengine_toolset([lookup_order, shipping_quote]) as toolset:
        agent = Agent(model, toolsets=[toolset])
        result = await agent.run("...")

The model sees one tool, ``execute_code``; the script calls the wrapped tools (functions,
``Tool`` s, or any toolset) by name, with their JSON schemas as signatures. A script's call
goes through a PydanticAI ``ToolManager`` of the wrapped toolset for the run's current step,
as the agent's own calls do: arguments validated (``args_validator`` included), the tool
given the run's ``RunContext`` (deps, usage, retries), async tools run on the agent's event
loop. A tool that raises (``ModelRetry``, ``ToolFailed``, a validation error) gives the
script ``{"error": "Tool execution failed: <Type>: <message>"}`` and does not spend the
agent's retry budget; a tool that needs approval or is deferred cannot run from a script
and answers that way. Needs the ``pydantic-ai`` extra.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import threading
from collections.abc import Sequence
from typing import Any

from execengine.config import Config
from execengine.engine.core import Engine
from execengine.integrations.core import ForeignTool, ToolBridge, missing_extra

try:
    from pydantic_ai import RunContext, ToolDefinition
    from pydantic_ai.messages import ToolCallPart, ToolReturn
    from pydantic_ai.tool_manager import ToolManager
    from pydantic_ai.tools import ToolDenied
    from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, ToolsetTool
    from pydantic_core import SchemaValidator, core_schema
except ImportError as exc:  # the extra is not installed
    raise missing_extra("PydanticAI", "pydantic-ai", exc) from exc

NAME = "execute_code"
#: execute_code's own arguments, checked as PydanticAI checks any tool's
ARGS = SchemaValidator(core_schema.typed_dict_schema({
    "code": core_schema.typed_dict_field(core_schema.str_schema()),
    "reset": core_schema.typed_dict_field(core_schema.bool_schema(), required=False),
}))
_call_ids = itertools.count(1)


class ExecengineToolset(AbstractToolset[Any]):
    """Wraps a toolset and offers only ``execute_code``, whose scripts call its tools.
    ``config`` / ``engine`` / ``session``: see
    :class:`~execengine.integrations.core.ToolBridge`. Close it (or use ``with``) to close
    its engine."""

    def __init__(self, wrapped: AbstractToolset[Any], *, config: Config | None = None,
                 engine: Engine | None = None, session: str | None = None,
                 id: str | None = None, max_retries: int = 1, name: str = NAME) -> None:
        self.wrapped = wrapped
        self.name = name
        self.max_retries = max_retries
        self._options: dict[str, Any] = {"config": config, "engine": engine,
                                         "session": session}
        self._id = id
        self._lock = threading.Lock()
        #: one bridge per set of tool definitions the wrapped toolset has offered
        self._bridges: dict[str, ToolBridge] = {}

    @property
    def id(self) -> str | None:
        return self._id

    # -- the run ------------------------------------------------------------------------

    async def for_run(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
        return self._with(await self.wrapped.for_run(ctx))

    async def for_run_step(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
        return self._with(await self.wrapped.for_run_step(ctx))

    def _with(self, wrapped: AbstractToolset[Any]) -> ExecengineToolset:
        if wrapped is self.wrapped:
            return self
        twin = copy.copy(self)  # the same bridges and lock: one engine for every run
        twin.wrapped = wrapped
        return twin

    async def __aenter__(self) -> ExecengineToolset:
        await self.wrapped.__aenter__()
        return self

    async def __aexit__(self, *args: Any) -> bool | None:
        return await self.wrapped.__aexit__(*args)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        bridge = self._bridge(await self.wrapped.get_tools(ctx))
        definition = ToolDefinition(name=self.name, description=bridge.description(),
                                    parameters_json_schema=bridge.parameters)
        return {self.name: ToolsetTool(toolset=self, tool_def=definition,
                                       max_retries=self.max_retries, args_validator=ARGS)}

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any],
                        tool: ToolsetTool[Any]) -> Any:
        bridge = self._bridge(await self.wrapped.get_tools(ctx))
        # the script's calls go through a manager of the wrapped toolset for this step; a
        # copy of the context, so the run's own keeps its manager
        manager = await ToolManager(toolset=self.wrapped).for_run_step(
            dataclasses.replace(ctx))
        result = await bridge.aexecute(str(tool_args.get("code") or ""),
                                       reset=bool(tool_args.get("reset")), context=manager)
        return result.to_json()

    def _bridge(self, tools: dict[str, ToolsetTool[Any]]) -> ToolBridge:
        definitions = [tools[n].tool_def for n in sorted(tools)]
        key = json.dumps([[d.name, d.description, d.parameters_json_schema]
                          for d in definitions], sort_keys=True, default=str)
        with self._lock:
            bridge = self._bridges.get(key)
            if bridge is None:
                bridge = ToolBridge([_foreign(d) for d in definitions],
                                    toolset=f"pydantic-ai-{len(self._bridges)}",
                                    **self._options)
                self._bridges[key] = bridge
            return bridge

    def close(self) -> None:
        with self._lock:
            bridges, self._bridges = list(self._bridges.values()), {}
        for bridge in bridges:
            bridge.close()

    def __enter__(self) -> ExecengineToolset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def execengine_toolset(tools: AbstractToolset[Any] | Sequence[Any], **options: Any
                       ) -> ExecengineToolset:
    """``execute_code`` over ``tools``: a toolset, or functions and ``Tool`` s (made a
    ``FunctionToolset``). ``options``: see :class:`ExecengineToolset`."""
    wrapped = tools if isinstance(tools, AbstractToolset) else FunctionToolset(list(tools))
    return ExecengineToolset(wrapped, **options)


def _foreign(definition: ToolDefinition) -> ForeignTool:
    name = definition.name

    async def acall(args: dict[str, Any], manager: ToolManager[Any]) -> Any:
        part = ToolCallPart(tool_name=name, args=args,
                            tool_call_id=f"{NAME}-script-{next(_call_ids)}")
        value = await manager.handle_call(part, wrap_validation_errors=False)
        if isinstance(value, ToolReturn):
            return value.return_value
        if isinstance(value, ToolDenied):  # a handler refused the call
            raise PermissionError(f"{name} was denied: {value.message}")
        return value

    return ForeignTool(name, definition.description or "", definition.parameters_json_schema,
                       acall=acall)
