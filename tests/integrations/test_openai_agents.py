"""OpenAI Agents SDK: a real Agent run by the real Runner, the model scripted with the SDK's
own ``agents.testing.ScriptedModel`` (no network: tracing is off)."""

from __future__ import annotations

import asyncio
import json
import threading

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

agents = require("agents", "openai-agents")
testing = require("agents.testing", "openai-agents")
openai_agents = require("execengine.integrations.openai_agents", "openai-agents")


def shop_tools(shop: Shop) -> list:
    lookup = agents.function_tool(shop.lookup_order, description_override=LOOKUP_DOC)
    quote = agents.function_tool(shop.shipping_quote, description_override=QUOTE_DOC)
    cancel = agents.function_tool(shop.cancel_order, description_override=CANCEL_DOC)
    return [lookup, quote, cancel]


def tool_output(call) -> str:
    """The output of the execute_code call in the model's input."""
    outputs = [item["output"] for item in call.input
               if isinstance(item, dict) and item.get("type") == "function_call_output"]
    assert len(outputs) == 1, call.input
    return outputs[0]


async def run_agent(shop: Shop, **tool_kw):
    tools = shop_tools(shop)
    model = testing.ScriptedModel([
        [testing.function_call("execute_code", {"code": SCRIPT}, call_id="call-1")],
        testing.ModelStep.respond(
            lambda call: [testing.assistant_message(answer_from(tool_output(call)))]),
    ])
    with openai_agents.execute_code_tool(tools, config=config(), **tool_kw) as code_tool:
        agent = agents.Agent(name="shop", model=model, tools=[*tools, code_tool])
        result = await agents.Runner.run(agent, "What does order A1 cost to ship?",
                                         run_config=agents.RunConfig(tracing_disabled=True))
    model.assert_complete()
    return result, model, code_tool


def test_one_script_calls_three_function_tools():
    shop = Shop()
    result, model, code_tool = asyncio.run(run_agent(shop))
    assert result.final_output == ANSWER
    assert shop.calls == EXPECTED_CALLS
    # the async tool ran on the run's own event loop (this thread's)
    assert shop.async_threads == [threading.get_ident()]
    # the model was offered the code tool beside the others, with their signatures
    offered = {t.name for t in model.calls[0].tools}
    assert offered == {"lookup_order", "shipping_quote", "cancel_order", "execute_code"}
    assert "lookup_order(order_id: str)" in code_tool.description
    assert LOOKUP_DOC in code_tool.description


def test_the_script_sees_the_tool_error_and_the_run_goes_on():
    shop = Shop()
    result, _, _ = asyncio.run(run_agent(shop))
    outputs = [item.output for item in result.new_items
               if type(item).__name__ == "ToolCallOutputItem"]
    printed = json.loads(json.loads(outputs[0])["output"])
    assert printed["cancel"] == {
        "error": "Tool execution failed: RuntimeError: order A1 has already shipped"}


def test_tools_needing_approval_and_hosted_tools_are_left_out():
    shop = Shop()
    guarded = agents.function_tool(shop.cancel_order, needs_approval=True)
    with openai_agents.execute_code_tool(
            [guarded, agents.WebSearchTool(), *shop_tools(shop)[:1]],
            config=config()) as code_tool:
        assert code_tool.bridge.names == {"lookup_order": "lookup_order"}


def test_a_session_keeps_variables_between_calls():
    shop = Shop()
    model = testing.ScriptedModel([
        [testing.function_call("execute_code", {"code": "x = 41"}, call_id="c1")],
        [testing.function_call("execute_code", {"code": "print(x + 1)"}, call_id="c2")],
        testing.ModelStep.respond(lambda call: [testing.assistant_message(
            json.loads(tool_output_last(call))["output"].strip())]),
    ])
    with openai_agents.execute_code_tool(shop_tools(shop), config=config(),
                                         session="s1") as code_tool:
        assert "reset" in code_tool.params_json_schema["properties"]
        agent = agents.Agent(name="shop", model=model, tools=[code_tool])
        # (Runner.run_sync keeps an event loop of its own open: asyncio.run closes it)
        result = asyncio.run(agents.Runner.run(
            agent, "go", run_config=agents.RunConfig(tracing_disabled=True)))
    assert result.final_output == "42"


def tool_output_last(call) -> str:
    return [item["output"] for item in call.input
            if isinstance(item, dict) and item.get("type") == "function_call_output"][-1]


def test_closing_is_idempotent_and_refuses_later_runs():
    code_tool = openai_agents.execute_code_tool(shop_tools(Shop()), config=config())
    code_tool.close()
    code_tool.close()
    with pytest.raises(Exception, match="closed"):
        code_tool.bridge.execute("print(1)")
