"""The driver-held tool pieces that need no Ray: the relay's parking logic and the specs."""

import asyncio
import json

from execengine.batch.driver_tools import DriverToolRelay, driver_tool_specs
from execengine.config import Config
from execengine.policy import ToolPolicy
from execengine.registry import ToolRegistry

SCHEMA = {"description": "d", "parameters": {"type": "object", "properties": {}}}


def test_relay_parks_a_call_until_the_driver_replies():
    async def scenario():
        relay = DriverToolRelay()
        call = asyncio.ensure_future(relay.call("secret", {"q": 1}, "batch:t1"))
        (item,) = await relay.take(10, 5.0)
        call_id, name, args, task_id = item
        assert (name, args, task_id) == ("secret", {"q": 1}, "batch:t1")
        assert not call.done()
        await relay.reply(call_id, '{"ok": true}')
        assert await asyncio.wait_for(call, 5) == '{"ok": true}'
        await relay.reply(call_id, "late duplicate")  # ignored
        assert await relay.take(10, 0.01) == []  # nothing waiting: returns empty in time

    asyncio.run(scenario())


def test_closing_the_relay_answers_every_waiting_call_with_an_error():
    async def scenario():
        relay = DriverToolRelay()
        call = asyncio.ensure_future(relay.call("secret", {}, None))
        await relay.take(10, 5.0)
        await relay.close()
        text = await asyncio.wait_for(call, 5)
        assert "stopped serving" in json.loads(text)["error"]
        later = await relay.call("secret", {}, None)
        assert "stopped serving" in json.loads(later)["error"]

    asyncio.run(scenario())


def test_specs_carry_available_driver_held_tools_only(monkeypatch):
    monkeypatch.delenv("EE_NOT_SET_ANYWHERE", raising=False)
    with ToolRegistry(Config()) as reg:
        held = ToolPolicy(script_callable=True, driver_held=True)
        reg.register("held_ok", "t", SCHEMA, lambda a, c: "x", policy=held)
        reg.register("held_missing_key", "t", SCHEMA, lambda a, c: "x", policy=held,
                     requires_env=["EE_NOT_SET_ANYWHERE"])
        reg.register("on_node", "t", SCHEMA, lambda a, c: "x",
                     policy=ToolPolicy(script_callable=True))
        specs = driver_tool_specs(reg)
    assert [s["name"] for s in specs] == ["held_ok"]
    (spec,) = specs
    assert spec["toolset"] == "t" and spec["schema"]["name"] == "held_ok"
    assert ToolPolicy(**spec["policy"]) == held
