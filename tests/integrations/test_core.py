"""The shared core: names, results, errors, sessions and MCP grouping, with plain Python
callables as the "framework" (real engine, real children)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from _integration_helpers import config

from execengine.errors import MissingExtraError
from execengine.integrations.core import ForeignTool, ToolBridge, missing_extra, script_name

ROOT = Path(__file__).resolve().parents[2]


def test_names_become_identifiers_without_clashes():
    taken: set[str] = set()
    got = []
    for name in ["get-weather", "get.weather", "class", "2fast", "aio", "_private", "x" * 80]:
        got.append(script_name(name, taken))
        taken.add(got[-1])
    assert got == ["get_weather", "get_weather_2", "class_tool", "tool_2fast", "aio_tool",
                   "private", "x" * 64]
    assert all(n.isidentifier() for n in got)


@dataclasses.dataclass
class Point:
    x: int
    y: int


def test_results_errors_and_a_session_with_mcp_grouping():
    tools = [
        ForeignTool("point", "A point.", {"type": "object", "properties": {}},
                    call=lambda args, ctx: Point(1, 2)),
        ForeignTool("text", "Plain text.", None, call=lambda args, ctx: "not json"),
        ForeignTool("boom", "Fails.", None, call=lambda args, ctx: 1 / 0),
        ForeignTool("mcp_demo_echo", "Echo.", {"type": "object", "properties": {
            "text": {"type": "string"}}, "required": ["text"]},
            call=lambda args, ctx: {"echo": args["text"], "ctx": ctx}, toolset="mcp-demo"),
    ]
    with ToolBridge(tools, config=config(), session="s") as bridge:
        first = bridge.execute("from hermes_tools import point, text, boom\n"
                               "kept = [point(), text(), boom()]", context="c1")
        second = bridge.execute("from hermes_tools import mcp\nimport json\n"
                                "print(json.dumps([kept, mcp.demo.echo(text='hi')]))",
                                context="c2")
    assert first.status == "success", first.stderr
    assert second.status == "success", second.stderr
    kept, echo = json.loads(second.output)
    assert kept == [{"x": 1, "y": 2}, "not json",
                    {"error": "Tool execution failed: ZeroDivisionError: division by zero"}]
    assert echo == {"echo": "hi", "ctx": "c2"}  # each call's own context


def test_a_script_can_call_only_the_tools_it_is_given():
    tools = [ForeignTool(n, "", None, call=lambda args, ctx: "ok") for n in ("a", "b")]
    with ToolBridge(tools, config=config()) as bridge:
        result = bridge.execute("import hermes_tools\nprint(hasattr(hermes_tools, 'a'), "
                                "hasattr(hermes_tools, 'b'))", tools=["a"])
    assert result.output == "True False\n"


def test_a_tool_without_a_callable_is_refused():
    with pytest.raises(Exception, match="give call or acall"):
        ForeignTool("x")


def test_a_missing_extra_names_the_extra_and_is_an_import_error():
    error = missing_extra("LangChain", "langchain", ImportError("No module named 'x'"))
    assert isinstance(error, MissingExtraError) and isinstance(error, ImportError)
    assert "pip install 'execengine[langchain]'" in str(error)


def test_importing_execengine_imports_no_framework():
    code = ("import sys, execengine, execengine.integrations, execengine.integrations.core\n"
            "import execengine.integrations.hermes\n"
            "print(sorted(m for m in ('agents', 'langchain_core', 'smolagents', "
            "'pydantic_ai', 'model_tools') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[]\n"


def test_an_engine_of_yours_gets_the_tools_and_loses_them_on_close():
    from execengine import Engine, ToolRegistry

    with ToolRegistry(config()) as registry, Engine(registry.config, registry) as engine:
        with ToolBridge([ForeignTool("ping", "", None, call=lambda args, ctx: "pong")],
                        engine=engine) as bridge:
            assert "ping" in registry
            assert bridge.execute("from hermes_tools import ping\nprint(ping())"
                                  ).output == "pong\n"
        assert "ping" not in registry
        assert engine.execute("print('still open')").output == "still open\n"
