import threading

import pytest

from execengine import (
    Config,
    SchemaError,
    ToolConflictError,
    ToolError,
    ToolRegistry,
    UnknownToolError,
    UnknownToolsetError,
)
from execengine.host.fake import FakeHost
from execengine.launch.inprocess import InProcessLauncher
from execengine.rpc.memory import MemoryServer
from execengine.toolsets import Toolset

SCHEMA = {"description": "Echo", "parameters": {"type": "object", "properties": {
    "text": {"type": "string"}}, "required": ["text"]}}


def echo(args, ctx):
    return {"echo": args["text"]}


def make(**kw):
    reg = ToolRegistry(Config())
    reg.register("echo", "demo", SCHEMA, echo, **kw)
    return reg


@pytest.mark.parametrize(
    ("name", "schema", "fragment"),
    [
        ("bad name!", SCHEMA, "is invalid"),
        ("t", {"parameters": {"type": "array"}}, "parameters.type must be 'object'"),
        ("t", {"parameters": {"type": "object", "properties": {"a": {"type": "strng"}}}},
         "'strng' is not a JSON type"),
        ("t", {"parameters": {"type": "object", "properties": {}, "required": ["x"]}},
         "undefined properties ['x']"),
        ("t", {"name": "other", "parameters": {"type": "object"}}, "different tool"),
        ("t", {"description": 5}, "'description' must be a string"),
        ("t", {"descripton": "x"}, "unexpected schema keys"),
        ("t", [], "must be a mapping"),
    ],
)
def test_malformed_schemas_are_rejected_with_reason(name, schema, fragment):
    with pytest.raises(SchemaError, match=None) as info:
        ToolRegistry().register(name, "demo", schema, echo)
    assert fragment in str(info.value)


def test_wrapped_openai_schema_is_accepted():
    reg = ToolRegistry()
    reg.register("echo", "demo", {"type": "function", "function": {"name": "echo", **SCHEMA}},
                 echo)
    assert reg.get("echo").schema["parameters"]["required"] == ["text"]


def test_conflict_rules():
    reg = make()
    with pytest.raises(ToolConflictError, match="already registered by toolset 'demo'"):
        reg.register("echo", "other", SCHEMA, echo)
    # same toolset re-registers (a reload) and override replaces
    reg.register("echo", "demo", SCHEMA, lambda a, c: "v2")
    assert reg.dispatch("echo", {"text": "x"}) == "v2"
    reg.register("echo", "other", SCHEMA, echo, override=True)
    assert reg.get("echo").toolset == "other"


def test_unknown_tool_suggests():
    reg = make()
    with pytest.raises(UnknownToolError, match="did you mean 'echo'"):
        reg.get("ecko")


def test_registration_is_thread_safe():
    reg = ToolRegistry()
    errors = []

    def worker(i):
        try:
            for j in range(50):
                reg.register(f"t{i}_{j}", f"set{i}", SCHEMA, echo)
        except Exception as exc:  # pragma: no cover - the assertion reports it
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(reg.names()) == 400


def test_check_fn_runs_once_per_build_and_exceptions_mean_unavailable():
    calls = []

    def shared_check(config):
        calls.append(1)
        return True

    def broken(config):
        raise RuntimeError("boom")

    reg = ToolRegistry()
    for i in range(5):
        reg.register(f"t{i}", "demo", SCHEMA, echo, check_fn=shared_check)
    reg.register("bad", "demo", SCHEMA, echo, check_fn=broken)
    reg.register("why", "demo", SCHEMA, echo, check_fn=lambda c: "no provider configured")
    defs = reg.get_tool_definitions()
    assert len(calls) == 1
    names = [d["function"]["name"] for d in defs]
    assert names == ["t0", "t1", "t2", "t3", "t4"]
    avail = reg.availability()
    assert avail["bad"].reason == "check failed: RuntimeError: boom"
    assert avail["why"].reason == "no provider configured"


def test_requires_env(monkeypatch):
    reg = make(requires_env=["EXECENGINE_TEST_NEEDED"])
    monkeypatch.delenv("EXECENGINE_TEST_NEEDED", raising=False)
    assert not reg.availability()["echo"].available
    assert "EXECENGINE_TEST_NEEDED" in reg.availability()["echo"].reason
    monkeypatch.setenv("EXECENGINE_TEST_NEEDED", "1")
    assert reg.availability()["echo"].available


def test_definition_selection_and_formats():
    reg = ToolRegistry()
    reg.register("a", "one", SCHEMA, echo)
    reg.register("b", "two", SCHEMA, echo)
    reg.register_toolset(Toolset("both", "a and b", includes=("one", "two")))
    names = lambda defs: [d["function"]["name"] for d in defs]  # noqa: E731
    assert names(reg.get_tool_definitions()) == ["a", "b"]
    assert names(reg.get_tool_definitions(["one"])) == ["a"]
    assert names(reg.get_tool_definitions(disabled_toolsets=["one"])) == ["b"]
    assert names(reg.get_tool_definitions(["both"], ["two"])) == ["a"]
    assert names(reg.get_tool_definitions(["one_tools"])) == ["a"]  # legacy suffix
    anthropic = reg.get_tool_definitions(["one"], format="anthropic")
    assert anthropic == [{"name": "a", "description": "Echo",
                          "input_schema": SCHEMA["parameters"]}]
    with pytest.raises(UnknownToolsetError, match="did you mean 'one'"):
        reg.get_tool_definitions(["onr"])


def test_config_toolsets_apply_when_no_arguments():
    cfg = Config().with_overrides({"toolsets.disabled": ["two"]})
    reg = ToolRegistry(cfg)
    reg.register("a", "one", SCHEMA, echo)
    reg.register("b", "two", SCHEMA, echo)
    assert [d["function"]["name"] for d in reg.get_tool_definitions()] == ["a"]


def test_schema_patch_sees_the_available_set_and_can_withhold():
    reg = ToolRegistry()
    seen = {}

    def patch(schema, ctx):
        seen["available"] = ctx.available
        if "b" not in ctx.available:
            return None
        schema["description"] = "tools: " + ", ".join(sorted(ctx.available))
        return schema

    reg.register("a", "one", SCHEMA, echo, schema_patch=patch)
    reg.register("b", "two", SCHEMA, echo, check_fn=lambda c: False)
    assert reg.get_tool_definitions() == []
    assert seen["available"] == frozenset({"a"})
    reg.register("b", "two", SCHEMA, echo)
    (a, _) = reg.get_tool_definitions()
    assert a["function"]["description"] == "tools: a, b"
    # the registered schema itself is untouched
    assert reg.get("a").schema["description"] == "Echo"


def test_toolset_availability():
    reg = ToolRegistry()
    reg.register("a", "one", SCHEMA, echo, check_fn=lambda c: "needs a key")
    status = reg.toolset_availability()
    assert not status["one"].available
    assert "needs a key" in status["one"].reason
    assert not status["file"].available  # declared, nothing registered


def test_services_are_made_once_and_closed_once_with_the_registry(tmp_path):
    closed = []

    class Host(FakeHost):
        def close(self):
            closed.append(1)

    host = Host(Config(), launcher=lambda: InProcessLauncher(MemoryServer(), lambda p: 0),
                cwd=str(tmp_path))
    with ToolRegistry(host=host) as reg:
        assert reg.services.host is host
        assert reg.services.terminal is reg.services.terminal
        assert reg.services.workdirs.get("any") == str(tmp_path)
        terminal = reg.services.terminal.backend
    reg.close()
    assert closed == [1] and terminal.closed
    for member in ("terminal", "host", "workdirs"):  # each read (and kept) before
        with pytest.raises(ToolError, match="closed"):
            getattr(reg.services, member)


def test_env_passthrough_merges_config_and_runtime():
    cfg = Config().with_overrides({"terminal.env_passthrough": ["A_TOKEN"]})
    reg = ToolRegistry(cfg)
    reg.add_env_passthrough(["B_KEY", "A_TOKEN"])
    assert reg.env_passthrough == ("A_TOKEN", "B_KEY")


def test_registry_wide_schema_patches_run_after_the_tools_own():
    reg = ToolRegistry()
    reg.register("a", "one", SCHEMA, echo,
                 schema_patch=lambda s, c: {**s, "description": s["description"] + "+own"})
    reg.register("b", "one", SCHEMA, echo)
    reg.add_schema_patch(lambda s, c: None if s["name"] == "b" else
                         {**s, "description": s["description"] + "+global"})
    reg.add_schema_patch(lambda s, c: 1 / 0 if s["name"] == "zzz" else s)
    (a,) = reg.get_tool_definitions()
    assert a["function"]["description"] == "Echo+own+global"


def test_a_registry_with_open_services_warns_when_collected():
    import gc

    plain = ToolRegistry()
    del plain
    gc.collect()  # no services, nothing leaks: no warning (warnings are errors here)
    reg = ToolRegistry()
    assert reg.services.terminal.backend is not None  # a terminal backend: closed with it
    with pytest.warns(ResourceWarning, match="was not closed"):
        del reg
        gc.collect()
