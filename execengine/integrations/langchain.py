"""LangChain / LangGraph: ``execute_code`` as a ``BaseTool`` over the agent's other tools.

::

    from execengine.integrations.langchain import ExecuteCodeTool

    with ExecuteCodeTool(tools=tools) as code_tool:
        agent = create_react_agent(model, tools + [code_tool])   # or create_agent(...)
        agent.invoke({"messages": [("user", "...")]})

The script calls the wrapped tools by name (sanitised to identifiers), with the schema the
model sees (``tool_call_schema``: injected arguments left out) as signatures. Each call is
the tool's own ``invoke`` (``ainvoke`` when the agent runs async: async tools then run on
the agent's event loop), with the callbacks of the ``execute_code`` run as parent, so
traces nest. What a tool returns reaches the script as it is (its content, for
``content_and_artifact`` tools); a tool that raises (``ToolException`` included, unless
its ``handle_tool_error`` turns it into text) gives ``{"error": "Tool execution failed:
<Type>: <message>"}``. Needs the ``langchain`` extra.
"""

from __future__ import annotations

from typing import Any

from execengine.config import Config
from execengine.engine.core import Engine
from execengine.integrations.core import ForeignTool, ToolBridge, missing_extra

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForToolRun,
        CallbackManagerForToolRun,
    )
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from pydantic import ConfigDict, PrivateAttr
except ImportError as exc:  # the extra is not installed
    raise missing_extra("LangChain", "langchain", exc) from exc


class ExecuteCodeTool(BaseTool):
    """Runs a Python script that calls ``tools``; sync (``invoke``) and async
    (``ainvoke``). ``config`` / ``engine`` / ``session``: see
    :class:`~execengine.integrations.core.ToolBridge`. A context manager; :meth:`close`
    closes its engine."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = "execute_code"
    description: str = ""
    tools: list[BaseTool]
    config: Config | None = None
    engine: Engine | None = None
    session: str | None = None
    _bridge: ToolBridge = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        wrapped = [t for t in self.tools if t.name != self.name]
        self._bridge = ToolBridge([_foreign(t) for t in wrapped], config=self.config,
                                  engine=self.engine, toolset="langchain",
                                  session=self.session)
        self.description = self.description or self._bridge.description()
        self.args_schema = self._bridge.parameters

    @property
    def bridge(self) -> ToolBridge:
        return self._bridge

    def _run(self, code: str, reset: bool = False,
             run_manager: CallbackManagerForToolRun | None = None) -> str:
        child = {"callbacks": run_manager.get_child()} if run_manager is not None else {}
        return self._bridge.execute(code, reset=reset, context=child).to_json()

    async def _arun(self, code: str, reset: bool = False,
                    run_manager: AsyncCallbackManagerForToolRun | None = None) -> str:
        child = {"callbacks": run_manager.get_child()} if run_manager is not None else {}
        result = await self._bridge.aexecute(code, reset=reset, context=child)
        return result.to_json()

    def close(self) -> None:
        self._bridge.close()

    def __enter__(self) -> ExecuteCodeTool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _foreign(tool: BaseTool) -> ForeignTool:
    function = convert_to_openai_tool(tool)["function"]

    def call(args: dict[str, Any], config: RunnableConfig | None) -> Any:
        return tool.invoke(args, config=config)

    async def acall(args: dict[str, Any], config: RunnableConfig | None) -> Any:
        return await tool.ainvoke(args, config=config)

    # a tool with only a coroutine cannot be invoked synchronously: always ainvoke it
    async_only = getattr(tool, "func", True) is None and getattr(tool, "coroutine", None)
    return ForeignTool(tool.name, function.get("description") or tool.description,
                       function.get("parameters"), call=None if async_only else call,
                       acall=acall)
