"""The execute_code tool (schema patch, fail closed) and ``execengine run``."""

from __future__ import annotations

import json
import os

import pytest
from _engine_helpers import engine_config, make_registry

from execengine.cli import main
from execengine.context import CallContext
from execengine.engine import Engine
from execengine.engine.tool import attach, bound_engine
from execengine.errors import ToolError
from execengine.registry import ToolRegistry
from execengine.tools import code_execution_tool


class _Hosted(ToolRegistry):
    """A registry holding its engine, closing it on close (test convenience)."""

    held: Engine | None = None

    def close(self) -> None:
        super().close()
        if self.held is not None:
            self.held.close()


def _registry(engine: bool = True):
    reg = make_registry(engine_config(), cls=_Hosted)
    reg.apply(code_execution_tool.specs)
    if engine:
        reg.held = Engine(reg.config, reg)
    return reg


def test_description_from_available_tools_and_config():
    reg = _registry()
    try:
        defs = {d["function"]["name"]: d["function"] for d in reg.get_tool_definitions()}
        text = defs["execute_code"]["description"]
        assert "- web_search: Search the web." in text and "memory" not in text
        assert "20s wall time; 50 tool calls" in text
        assert "private temporary directory" in text  # strict mode
        # only web enabled: the description lists just that
        defs = reg.get_tool_definitions(["web", "code_execution"])
        text = next(d["function"]["description"] for d in defs
                    if d["function"]["name"] == "execute_code")
        assert "web_search" in text and "terminal" not in text
    finally:
        reg.close()


def test_empty_allowed_set_fails_closed():
    reg = _registry()
    try:
        names = [d["function"]["name"] for d in
                 reg.get_tool_definitions(["code_execution", "memory"])]
        assert names == ["memory"]  # withheld
        out = json.loads(reg.dispatch("execute_code", {"code": "print(1)"}, CallContext(
            enabled_toolsets=("code_execution", "memory"))))
        assert out["status"] == "error" and "unavailable" in out["error"]
        out = json.loads(reg.dispatch("execute_code", {"code": "print(1)"},
                                      CallContext(enabled_tools=("memory", "execute_code"))))
        assert "unavailable" in out["error"]
        # a script cannot reach execute_code
        out = json.loads(reg.dispatch("execute_code", {"code": "1"},
                                      CallContext(origin="execute_code")))
        assert "cannot be called from a script" in out["error"]
    finally:
        reg.close()


def test_tool_runs_a_script():
    reg = _registry()
    try:
        out = json.loads(reg.dispatch("execute_code", {
            "code": "from hermes_tools import web_search\nprint(web_search('q')['query'])"},
            task_id="t"))
        assert out["status"] == "success" and out["output"] == "q\n"
        assert out["tool_calls_made"] == 1
    finally:
        reg.close()


def test_builtin_registry_offers_execute_code():
    reg = ToolRegistry.with_builtins(plugins=False)
    try:
        assert "execute_code" in reg
    finally:
        reg.close()


def test_execute_code_needs_an_attached_engine():
    reg = _registry(engine=False)
    try:
        names = [d["function"]["name"] for d in reg.get_tool_definitions()]
        assert "execute_code" not in names and "web_search" in names  # withheld
        out = json.loads(reg.dispatch("execute_code", {"code": "print(1)"}))
        assert out["status"] == "error" and "no Engine is attached" in out["error"]
    finally:
        reg.close()


def test_one_engine_per_registry(tmp_path):
    reg = _registry(engine=False)
    first = Engine(reg.config, reg)
    second = Engine(reg.config, reg)  # the registry already has one: not attached
    try:
        assert bound_engine(reg) is first
        out = json.loads(reg.dispatch("execute_code", {"code": "print(2)"}))
        assert out["status"] == "success" and out["output"] == "2\n"
        assert second._server is None  # the tool never touched the second engine
        with pytest.raises(ToolError, match="one engine per registry"):
            attach(reg, second)
        first.close()
        assert bound_engine(reg) is None  # closing unbinds
        attach(reg, second)
        assert bound_engine(reg) is second
    finally:
        second.close()
        reg.close()


def test_cli_run(tmp_path, capsys):
    script = tmp_path / "s.py"
    script.write_text("print('from file')\n")
    assert main(["run", str(script), "--mode", "strict"]) == 0
    cap = capsys.readouterr()
    assert cap.out == "from file\n" and "[success] 0 tool calls" in cap.err
    assert main(["run", "-c", "raise SystemExit(4)"]) == 4
    capsys.readouterr()
    assert main(["run", "--json", "--timeout", "0.5", "-c", "import time; time.sleep(9)"]) == 124
    assert json.loads(capsys.readouterr().out)["status"] == "timeout"
    assert main(["run", str(tmp_path / "missing.py")]) == 2
    assert "cannot read script" in capsys.readouterr().err
    assert main(["run", "--toolsets", "nope", "-c", "pass"]) == 2
    capsys.readouterr()
    assert main(["run", "--isolation", "none", "-c", "import os; print(os.getuid())"]) == 0
    assert capsys.readouterr().out == f"{os.getuid()}\n"


def test_description_says_what_the_isolation_level_means():
    import pytest

    from execengine.config import Config
    from execengine.engine.tool import describe
    from execengine.isolation import detect

    def text_for(**overrides):
        cfg = Config().with_overrides({f"code_execution.{k}": v for k, v in overrides.items()})
        with ToolRegistry.with_builtins(cfg, plugins=False) as reg:
            return describe(reg, ["read_file"])

    assert "sandboxed" not in text_for(isolation="none")
    if not detect().levels.get("isolated"):
        pytest.skip("level isolated is not available here")
    assert "Network access is off." in text_for(isolation="isolated")
    assert "Network access is on." in text_for(isolation="isolated", network=True)


def test_an_engine_left_open_warns_when_collected():
    import gc

    import pytest

    from execengine.engine import Engine
    from execengine.launch.local import LocalLauncher

    with ToolRegistry() as reg:
        engine = Engine(registry=reg, launcher=LocalLauncher())
        with pytest.warns(ResourceWarning, match="Engine was not closed"):
            del engine
            gc.collect()
        closed = Engine(registry=reg, launcher=LocalLauncher())
        closed.close()
        closed.close()  # idempotent
        del closed
        gc.collect()  # no warning: warnings are errors in this suite
