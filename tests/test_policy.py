"""Tool policy declared on registration, end to end through a real script.

A user's own tool marked callable works from an execute_code script with no other step; a
parameter its policy hides is absent from the script's stub and refused on the host when a
script sends it anyway; a tool not marked callable is neither in the stub nor reachable.
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
import threading

import pytest

from execengine import Config, Engine, ToolRegistry
from execengine.context import CallContext
from execengine.engine.plan import allowed_tools, function_schemas, script_call_handler
from execengine.errors import ToolError
from execengine.launch.local import LocalLauncher
from execengine.policy import ToolPolicy

WEATHER = {
    "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"},
        "units": {"type": "string", "enum": ["C", "F"], "default": "C"},
    }, "required": ["city"]},
}
NOTHING = {"description": "Something scripts must not reach",
           "parameters": {"type": "object", "properties": {}}}


@pytest.fixture
def host():
    """A host's own registry with two tools of its own, and its engine (level none)."""
    cfg = Config().with_overrides({"code_execution.mode": "strict",
                                   "code_execution.timeout": 20.0,
                                   "code_execution.kill_grace": 0.5})
    calls: list[tuple[str, dict, str]] = []
    lock = threading.Lock()

    def weather(args, ctx):
        with lock:
            calls.append(("weather", dict(args), ctx.origin))
        return {"city": args["city"], "temp_c": 21}

    def launch_missiles(args, ctx):
        with lock:
            calls.append(("launch_missiles", dict(args), ctx.origin))
        return {"launched": True}

    with ToolRegistry(cfg) as reg:
        reg.register("weather", "weather", WEATHER, weather,
                     policy=ToolPolicy(script_callable=True, hidden_params={"units"}))
        reg.register("launch_missiles", "danger", NOTHING, launch_missiles)
        with Engine(cfg, reg, launcher=LocalLauncher()) as engine:
            yield engine, calls


def run(engine, code):
    return engine.execute(textwrap.dedent(code), task_id="t1")


def test_own_tool_callable_from_a_script_hidden_param_and_uncallable_tool(host):
    engine, calls = host
    r = run(engine, """
        import inspect, json
        import hermes_tools
        from hermes_tools import weather
        from _execengine.client import call_tool
        print(json.dumps(weather("Oslo")))
        print(json.dumps(list(inspect.signature(weather).parameters)))
        print(json.dumps(hasattr(hermes_tools, "launch_missiles")))
        print(json.dumps(call_tool("weather", {"city": "Rome", "units": "F"})))
        print(json.dumps(call_tool("launch_missiles", {})))
        print(json.dumps(call_tool("weather", {"city": 5, "junk": True})))
    """)
    assert r.status == "success", r.error
    out = [json.loads(line) for line in r.output.splitlines()]
    assert out[0] == {"city": "Oslo", "temp_c": 21}
    assert out[1] == ["city"]  # units is hidden from the stub
    assert out[2] is False  # not callable: not in the stub
    assert "units" in out[3]["error"] and "not allowed" in out[3]["error"]
    assert "launch_missiles" in out[4]["error"] and "not available" in out[4]["error"]
    # arguments a script sends are validated on the host like the model's
    assert "city: expected string, got integer" in out[5]["error"]
    assert "junk: unknown field (known fields: city, units)" in out[5]["error"]
    # only the allowed call reached a handler, with origin execute_code
    assert calls == [("weather", {"city": "Oslo"}, "execute_code")]
    assert r.tool_calls_made >= 1


def test_the_model_still_sees_and_calls_every_parameter(host):
    engine, _ = host
    reg = engine.registry
    fn = next(d["function"] for d in reg.get_tool_definitions()
              if d["function"]["name"] == "weather")
    assert "units" in fn["parameters"]["properties"]  # hidden from scripts only
    assert json.loads(reg.dispatch("weather", {"city": "Oslo", "units": "F"}))["temp_c"] == 21
    assert json.loads(reg.dispatch("launch_missiles", {})) == {"launched": True}
    assert allowed_tools(reg) == ["weather"]
    script_fn = function_schemas(reg, ["weather"])[0]
    assert list(script_fn["parameters"]["properties"]) == ["city"]


def test_policy_is_checked_at_registration():
    with ToolRegistry() as reg:
        with pytest.raises(ToolError, match="hidden_params names no parameter: nope"):
            reg.register("w", "w", WEATHER, lambda a, c: "",
                         policy=ToolPolicy(hidden_params={"nope"}))
        with pytest.raises(ToolError, match="must be a ToolPolicy"):
            reg.register("w", "w", WEATHER, lambda a, c: "", policy={"script_callable": True})
    with pytest.raises(ToolError, match="agent-level"):
        ToolPolicy(agent_level=True, script_callable=True)
    policy = ToolPolicy(hidden_params=["a"])  # type: ignore[arg-type]
    assert policy.hidden_params == frozenset({"a"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.script_callable = True  # type: ignore[misc]


def test_builtin_tools_declare_their_policy():
    with ToolRegistry.with_builtins(plugins=False) as reg:
        policies = {e.name: e.policy for e in reg.entries()}
    callable_ = sorted(n for n, p in policies.items() if p.script_callable)
    assert callable_ == ["patch", "read_file", "search_files", "terminal", "web_extract",
                         "web_search", "write_file"]
    assert policies["terminal"].hidden_params == {"background", "pty"}
    agent = sorted(n for n, p in policies.items() if p.agent_level)
    assert agent == ["delegate_task", "memory", "session_search", "todo"]
    assert not policies["execute_code"].script_callable
    assert not policies["process"].script_callable
    assert policies["web_search"].driver_held


def test_script_call_handler_refuses_what_scripts_may_not_call():
    # the host-side handler checks again (one registry lookup): unknown, not callable and
    # agent-level tools and hidden parameters are refused; the rest is dispatched
    with ToolRegistry(Config()) as reg:
        reg.register("weather", "weather", WEATHER, lambda a, c: {"city": a["city"]},
                     policy=ToolPolicy(script_callable=True, hidden_params={"units"}))
        reg.register("launch_missiles", "danger", NOTHING, lambda a, c: {"launched": True})
        reg.register("memory", "memory", NOTHING, lambda a, c: {},
                     policy=ToolPolicy(agent_level=True))
        handle = script_call_handler(reg, CallContext())
        assert json.loads(handle("weather", {"city": "Oslo"})) == {"city": "Oslo"}
        for tool in ("launch_missiles", "memory", "no_such_tool"):
            assert json.loads(handle(tool, {})) == {
                "error": f"{tool} is not callable from execute_code scripts"}
        refused = json.loads(handle("weather", {"city": "Oslo", "units": "F"}))
        assert "units" in refused["error"] and "not allowed" in refused["error"]
