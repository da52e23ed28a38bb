"""PydanticAI: a real Agent with the library's own ``FunctionModel`` (and ``TestModel``),
real model requests blocked (``ALLOW_MODEL_REQUESTS = False``)."""

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

pydantic_ai = require("pydantic_ai", "pydantic-ai")
models = require("pydantic_ai.models", "pydantic-ai")
function = require("pydantic_ai.models.function", "pydantic-ai")
test_model = require("pydantic_ai.models.test", "pydantic-ai")
pai_messages = require("pydantic_ai.messages", "pydantic-ai")
integration = require("execengine.integrations.pydantic_ai", "pydantic-ai")


@pytest.fixture(autouse=True)
def _no_real_models(monkeypatch):
    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", False)


def shop_tools(shop: Shop, deps_seen: list) -> list:
    def lookup_order(ctx: pydantic_ai.RunContext[str], order_id: str) -> dict:
        deps_seen.append(ctx.deps)
        return shop.lookup_order(order_id)

    async def shipping_quote(weight_kg: float) -> dict:
        return await shop.shipping_quote(weight_kg)

    def cancel_order(order_id: str) -> str:
        return shop.cancel_order(order_id)

    return [pydantic_ai.Tool(lookup_order, description=LOOKUP_DOC),
            pydantic_ai.Tool(shipping_quote, description=QUOTE_DOC),
            pydantic_ai.Tool(cancel_order, description=CANCEL_DOC)]


def scripted(script: str, offered: list):
    """A FunctionModel: one execute_code call, then the answer from its result."""

    def respond(messages, info):
        offered.append(sorted(t.name for t in info.function_tools))
        returns = [part for message in messages for part in message.parts
                   if isinstance(part, pai_messages.ToolReturnPart)]
        if not returns:
            return pai_messages.ModelResponse(parts=[pai_messages.ToolCallPart(
                "execute_code", {"code": script}, tool_call_id="call-1")])
        return pai_messages.ModelResponse(
            parts=[pai_messages.TextPart(answer_from(returns[-1].content))])

    return function.FunctionModel(respond)


def test_one_script_calls_three_tools_with_the_runs_deps():
    shop, deps_seen, offered = Shop(), [], []

    async def main():
        with integration.execengine_toolset(shop_tools(shop, deps_seen),
                                            config=config()) as toolset:
            agent = pydantic_ai.Agent(scripted(SCRIPT, offered), toolsets=[toolset],
                                      deps_type=str)
            result = await agent.run("What does order A1 cost to ship?", deps="shop-db")
        return result, threading.get_ident()

    result, loop_thread = asyncio.run(main())
    assert result.output == ANSWER
    assert shop.calls == EXPECTED_CALLS
    assert deps_seen == ["shop-db"]  # the run's RunContext reached the tool
    assert shop.async_threads == [loop_thread]  # the async tool ran on the agent's loop
    assert offered == [["execute_code"], ["execute_code"]]


def test_the_model_is_offered_execute_code_with_the_tools_signatures():
    shop = Shop()
    model = test_model.TestModel(call_tools=[])

    async def main():
        with integration.execengine_toolset(shop_tools(shop, []),
                                            config=config()) as toolset:
            agent = pydantic_ai.Agent(model, toolsets=[toolset], deps_type=str)
            await agent.run("hi", deps="x")

    asyncio.run(main())
    (offered,) = model.last_model_request_parameters.function_tools
    assert offered.name == "execute_code"
    assert offered.parameters_json_schema["required"] == ["code"]
    assert "lookup_order(order_id: str)" in offered.description
    assert "shipping_quote(weight_kg: float)" in offered.description
    assert LOOKUP_DOC in offered.description
    assert shop.calls == []


def test_validation_errors_and_model_retry_reach_the_script_as_errors():
    def strict(n: int) -> int:
        if n < 0:
            raise pydantic_ai.ModelRetry("n must not be negative")
        return n * 2

    script = ("from hermes_tools import strict\n"
              "import json\n"
              "print(json.dumps([strict(n=2), strict(n=-1), strict(n='x')]))")

    async def main():
        with integration.execengine_toolset([strict], config=config()) as toolset:
            model = function.FunctionModel(lambda messages, info: (
                pai_messages.ModelResponse(parts=[pai_messages.ToolCallPart(
                    "execute_code", {"code": script}, tool_call_id="c1")])
                if len(messages) == 1 else pai_messages.ModelResponse(parts=[
                    pai_messages.TextPart(next(
                        p.content for m in messages for p in m.parts
                        if isinstance(p, pai_messages.ToolReturnPart)))])))
            return await pydantic_ai.Agent(model, toolsets=[toolset]).run("go")

    result = asyncio.run(main())
    printed = json.loads(json.loads(result.output)["output"])
    assert printed[0] == 4
    assert printed[1] == {"error": "Tool execution failed: ModelRetry: n must not be negative"}
    # a wrong type is refused by execengine's own schema check, before the tool
    assert "n" in printed[2]["error"] and "integer" in printed[2]["error"]


def test_a_tool_needing_approval_cannot_run_from_a_script():
    ran = []

    def danger(x: int) -> int:
        ran.append(x)
        return x

    script = "from hermes_tools import danger\nprint(danger(x=1))"

    def respond(messages, info):
        returns = [p for m in messages for p in m.parts
                   if isinstance(p, pai_messages.ToolReturnPart)]
        if not returns:
            return pai_messages.ModelResponse(parts=[pai_messages.ToolCallPart(
                "execute_code", {"code": script}, tool_call_id="c1")])
        return pai_messages.ModelResponse(parts=[pai_messages.TextPart(returns[-1].content)])

    async def main():
        tool = pydantic_ai.Tool(danger, requires_approval=True)
        with integration.execengine_toolset([tool], config=config()) as toolset:
            return await pydantic_ai.Agent(function.FunctionModel(respond),
                                           toolsets=[toolset]).run("go")

    output = json.loads(asyncio.run(main()).output)["output"]
    assert output == "{'error': 'Tool execution failed: ApprovalRequired: '}\n"
    assert ran == []
