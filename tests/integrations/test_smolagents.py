"""smolagents: a real CodeAgent whose executor is execengine's, driven by a scripted
``Model`` (the pattern of smolagents' own tests: ``generate`` returns a ChatMessage with a
code block). The tools are real smolagents Tools: one ``@tool`` function, one Tool whose
``forward`` is async, one that raises."""

from __future__ import annotations

import json

import pytest
from _integration_helpers import (
    CANCEL_DOC,
    EXPECTED_CALLS,
    LOOKUP_DOC,
    QUOTE_DOC,
    Shop,
    config,
    require,
)

smolagents = require("smolagents", "smolagents")
smol_models = require("smolagents.models", "smolagents")
integration = require("execengine.integrations.smolagents", "smolagents")
tool = smolagents.tool  # smolagents reads the decorator's bare name in the source

#: the first step: the three tools by their bare names, the order id from the agent's
#: state (additional_args); the second step answers from what the first left behind
STEP_1 = """import json
order = lookup_order(order_id=order_id)
quote = shipping_quote(weight_kg=order["weight_kg"])
cancelled = cancel_order(order_id=order_id)
print(json.dumps({"quote": quote, "cancel": cancelled}))
"""
STEP_2 = """
final_answer(f"{order['item']} ships for {quote['eur']} EUR; "
             f"cancelling failed: {cancelled['error']}")
"""
ANSWER = ("kettle ships for 7.5 EUR; cancelling failed: Tool execution failed: "
          "RuntimeError: order A1 has already shipped")


class ScriptedModel(smol_models.Model):
    """Answers each call with the next step's code."""

    def __init__(self, steps: list[str]) -> None:
        super().__init__(model_id="scripted")
        self.steps = list(steps)
        self.seen: list = []

    def generate(self, messages, stop_sequences=None, response_format=None,
                 tools_to_call_from=None, **kwargs):
        self.seen.append(messages)
        code = self.steps.pop(0)
        return smol_models.ChatMessage(role=smol_models.MessageRole.ASSISTANT,
                                       content=f"Thought: next.\n<code>\n{code}\n</code>")


def shop_tools(shop: Shop) -> list:
    @tool
    def lookup_order(order_id: str) -> dict:
        """Look up an order by its id. Returns its item and weight.

        Args:
            order_id: The order's id.
        """
        return shop.lookup_order(order_id)

    class ShippingQuote(smolagents.Tool):
        name = "shipping_quote"
        description = QUOTE_DOC
        inputs = {"weight_kg": {"type": "number", "description": "parcel weight"}}
        output_type = "object"

        async def forward(self, weight_kg: float) -> dict:
            return await shop.shipping_quote(weight_kg)

    class CancelOrder(smolagents.Tool):
        name = "cancel_order"
        description = CANCEL_DOC
        inputs = {"order_id": {"type": "string", "description": "The order's id."}}
        output_type = "string"

        def forward(self, order_id: str) -> str:
            return shop.cancel_order(order_id)

    return [lookup_order, ShippingQuote(), CancelOrder()]


def observation(agent, step: int) -> str:
    return agent.memory.steps[step].observations


def test_code_agent_runs_steps_in_one_session_and_calls_tools_over_rpc():
    shop = Shop()
    model = ScriptedModel([STEP_1, STEP_2])
    executor = integration.ExecengineExecutor(config=config())
    with smolagents.CodeAgent(tools=shop_tools(shop), model=model, executor=executor,
                              additional_authorized_imports=["json"]) as agent:
        answer = agent.run("What does order A1 cost to ship?",
                           additional_args={"order_id": "A1"})
        printed = json.loads(observation(agent, 1).split("Execution logs:\n", 1)[1]
                             .split("Last output", 1)[0])
    assert answer == ANSWER
    assert shop.calls == EXPECTED_CALLS
    assert printed["cancel"] == {
        "error": "Tool execution failed: RuntimeError: order A1 has already shipped"}
    assert model.steps == []  # two model calls: the agent finished
    assert LOOKUP_DOC in executor.bridge.registry.get("lookup_order").description


def test_a_failing_step_is_shown_to_the_model_and_the_next_step_goes_on():
    shop = Shop()
    model = ScriptedModel(["x = 1\nraise ValueError('bad step')", "final_answer(x + 1)"])
    with smolagents.CodeAgent(tools=shop_tools(shop), model=model,
                              executor=integration.ExecengineExecutor(config=config()),
                              ) as agent:
        answer = agent.run("go")
        error = agent.memory.steps[1].error
    assert answer == 2
    assert "ValueError: bad step" in str(error)
    assert 'File "<code>", line 2' in str(error)  # the step's own line numbers


def test_code_after_final_answer_does_not_run():
    model = ScriptedModel(["final_answer('done')\nprint('after')"])
    with smolagents.CodeAgent(tools=[], model=model,
                              executor=integration.ExecengineExecutor(config=config()),
                              ) as agent:
        assert agent.run("go") == "done"
        assert "after" not in (observation(agent, 1) or "")


def test_state_stays_between_calls_and_cleanup_closes_the_engine():
    executor = integration.ExecengineExecutor(config=config())
    executor.send_tools({})
    executor.send_variables({"n": 41, "not_json": object()})
    assert executor("m = n + 1").logs == ""
    assert executor("print(m)").logs == "42\n"
    bridge = executor.bridge
    executor.cleanup()
    executor.cleanup()
    with pytest.raises(Exception, match="closed"):
        bridge.execute("print(1)")
