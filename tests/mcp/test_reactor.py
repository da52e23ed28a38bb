"""The MCP client shares the process's one background reactor (execengine._asyncbridge):
no loop thread of its own, a closed manager leaves the reactor running for its other users,
and a synchronous MCP call from the reactor's own thread is refused, not a deadlock."""

from __future__ import annotations

import asyncio
import json
import threading

from _mcp_helpers import toy_server

from execengine._asyncbridge import bridge
from execengine.policy import ToolPolicy


def _loop_threads() -> list[str]:
    """Threads running an event loop of ours (the reactor; MCP's own one, formerly)."""
    return sorted(t.name for t in threading.enumerate()
                  if t.name in ("execengine-async", "execengine-mcp"))


def test_two_managers_and_async_tools_share_one_reactor(mcp_registry):
    reg1, first = mcp_registry(toy_server("toy"))
    reg2, second = mcp_registry(toy_server("other"))
    assert first.reactor is second.reactor is bridge()
    assert _loop_threads() == ["execengine-async"]  # no thread of MCP's own
    assert json.loads(reg1.dispatch("mcp_toy_echo", {"text": "a"})) == {"result": "a"}

    # closing one manager stops its server, not the reactor
    reg1.close()
    assert bridge().run(asyncio.sleep(0, result="alive"), timeout=5) == "alive"
    assert json.loads(reg2.dispatch("mcp_other_echo", {"text": "b"})) == {"result": "b"}
    assert _loop_threads() == ["execengine-async"]


def test_a_sync_mcp_call_from_an_async_tool_is_refused_not_deadlocked(mcp_registry):
    reg, _ = mcp_registry(toy_server("toy"))

    async def calls_mcp_synchronously(args, ctx):
        return json.loads(reg.dispatch("mcp_toy_echo", {"text": "x"}))

    async def calls_mcp_asynchronously(args, ctx):
        return json.loads(await reg.adispatch("mcp_toy_echo", {"text": "y"}))

    schema = {"description": "t", "parameters": {"type": "object", "properties": {}}}
    for name, fn in (("sync_inside", calls_mcp_synchronously),
                     ("async_inside", calls_mcp_asynchronously)):
        reg.register(name, "test", schema, fn, policy=ToolPolicy(script_callable=True))
    refused = json.loads(reg.dispatch("sync_inside", {}))
    assert "synchronously from the background reactor" in refused["error"]
    assert json.loads(reg.dispatch("async_inside", {})) == {"result": "y"}
