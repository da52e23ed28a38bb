"""LangChain / LangGraph: LangGraph's prebuilt ReAct agent with langchain-core's own
``GenericFakeChatModel`` (taught ``bind_tools``, which no fake implements), run sync and
async; the tools are real ``StructuredTool`` s (one async-only, one raising
``ToolException``)."""

from __future__ import annotations

import asyncio
import json
import threading
import warnings
from collections.abc import Iterator

import pytest
from _integration_helpers import (
    ANSWER,
    CANCEL_DOC,
    EXPECTED_CALLS,
    LOOKUP_DOC,
    QUOTE_DOC,
    SCRIPT,
    Shop,
    answer_from,
    config,
    require,
)

fake = require("langchain_core.language_models.fake_chat_models", "langchain")
messages = require("langchain_core.messages", "langchain")
tools_mod = require("langchain_core.tools", "langchain")
prebuilt = require("langgraph.prebuilt", "langchain")
integration = require("execengine.integrations.langchain", "langchain")


class ScriptedChat(fake.GenericFakeChatModel):
    """The fake chat model, bound to tools (it ignores them) and keeping what it saw."""

    seen: list = []

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def replies(model: ScriptedChat, script: str) -> Iterator:
    yield messages.AIMessage(content="", tool_calls=[
        {"name": "execute_code", "args": {"code": script}, "id": "call-1"}])
    tool_messages = [m for m in model.seen[-1] if isinstance(m, messages.ToolMessage)]
    assert len(tool_messages) == 1
    yield messages.AIMessage(content=answer_from(tool_messages[0].content))


def shop_tools(shop: Shop) -> list:
    def cancel(order_id: str) -> str:
        try:
            return shop.cancel_order(order_id)
        except RuntimeError as exc:
            raise tools_mod.ToolException(str(exc)) from exc

    return [
        tools_mod.StructuredTool.from_function(shop.lookup_order, name="lookup_order",
                                               description=LOOKUP_DOC),
        tools_mod.StructuredTool.from_function(coroutine=shop.shipping_quote,
                                               name="shipping_quote", description=QUOTE_DOC),
        tools_mod.StructuredTool.from_function(cancel, name="cancel_order",
                                               description=CANCEL_DOC),
    ]


def make_agent(shop: Shop, code_tool):
    model = ScriptedChat(messages=iter(()))
    model.seen = []
    model.messages = replies(model, SCRIPT)
    with warnings.catch_warnings():  # the prebuilt agent may announce its successor
        warnings.simplefilter("ignore", DeprecationWarning)
        agent = prebuilt.create_react_agent(model, [*code_tool.tools, code_tool])
    return agent, model


def final_text(state) -> str:
    return state["messages"][-1].content


EXPECTED = [(name, args) for name, args in EXPECTED_CALLS]
#: ToolException is what a LangChain tool raises for its own errors
ANSWER_LC = ANSWER.replace("RuntimeError", "ToolException")


def test_sync_agent_one_script_three_tools():
    shop = Shop()
    with integration.ExecuteCodeTool(tools=shop_tools(shop), config=config()) as code_tool:
        agent, model = make_agent(shop, code_tool)
        state = agent.invoke({"messages": [("user", "What does order A1 cost to ship?")]})
    assert final_text(state) == ANSWER_LC
    assert shop.calls == EXPECTED
    assert len(model.seen) == 2  # one tool round, then the answer
    # the async-only tool ran on execengine's loop: not this thread
    assert shop.async_threads and shop.async_threads[0] != threading.get_ident()


def test_async_agent_runs_async_tools_on_its_loop():
    shop = Shop()

    async def main():
        with integration.ExecuteCodeTool(tools=shop_tools(shop),
                                         config=config()) as code_tool:
            agent, _ = make_agent(shop, code_tool)
            state = await agent.ainvoke({"messages": [("user", "ship A1?")]})
        return state, threading.get_ident()

    state, loop_thread = asyncio.run(main())
    assert final_text(state) == ANSWER_LC
    assert shop.calls == EXPECTED
    assert shop.async_threads == [loop_thread]


def test_schema_and_docs_reach_the_model_and_the_stub():
    shop = Shop()
    with integration.ExecuteCodeTool(tools=shop_tools(shop), config=config()) as code_tool:
        assert code_tool.tool_call_schema["required"] == ["code"]
        assert "lookup_order(order_id: str)" in code_tool.description
        assert "shipping_quote(weight_kg: float)" in code_tool.description
        result = json.loads(code_tool.invoke({"code": (
            "import hermes_tools\n"
            "print(hermes_tools.describe_tool('lookup_order')['doc'])")}))
    assert result["status"] == "success", result
    assert LOOKUP_DOC in result["output"]


def test_a_tool_error_turned_into_text_by_the_tool_comes_back_as_that_text():
    def fail(order_id: str) -> str:
        raise tools_mod.ToolException("no such order")

    handled = tools_mod.StructuredTool.from_function(fail, name="cancel_order", description="x",
                                                     handle_tool_error=True)
    with integration.ExecuteCodeTool(tools=[handled], config=config()) as code_tool:
        result = json.loads(code_tool.invoke({"code": (
            "from hermes_tools import cancel_order\nprint(cancel_order(order_id='x'))")}))
    assert result["output"] == "no such order\n"


def test_names_are_sanitised_to_identifiers():
    tool = tools_mod.StructuredTool.from_function(lambda q: q.upper(), name="web-search",
                                                  description="Search.")
    with integration.ExecuteCodeTool(tools=[tool], config=config()) as code_tool:
        assert code_tool.bridge.names == {"web_search": "web-search"}
        result = json.loads(code_tool.invoke({"code": (
            "from hermes_tools import web_search\nprint(web_search(q='hi'))")}))
    assert result["output"] == "HI\n"


def test_a_closed_tool_refuses_to_run():
    code_tool = integration.ExecuteCodeTool(tools=[], config=config())
    code_tool.close()
    with pytest.raises(Exception, match="closed"):
        code_tool.invoke({"code": "print(1)"})
