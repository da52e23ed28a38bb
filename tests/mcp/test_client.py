"""The MCP client against a scripted server (tests/mcp/servers/toy.py) over real stdio."""

from __future__ import annotations

import concurrent.futures
import json
import time

import pytest
from _mcp_helpers import TOY, run_script, toy_server

from execengine.engine.plan import allowed_tools


def test_tools_registered_callable_from_scripts_and_results_decoded(mcp_registry):
    reg, _ = mcp_registry(toy_server("toy"))
    names = [n for n in reg.names() if n.startswith("mcp_")]
    assert "mcp_toy_add" in names and "mcp_toy_echo" in names
    entry = reg.get("mcp_toy_add")
    assert entry.toolset == "mcp-toy"
    assert entry.description == "Add integers."
    assert set(entry.parameters["properties"]) == {"a", "b"}
    assert "mcp_toy_add" in allowed_tools(reg)
    result = run_script(reg, """
from hermes_tools import mcp_toy_echo, mcp, mcp_toy_picture, mcp_toy_fail
import json
print(json.dumps([mcp_toy_echo(text="hi", times=2), mcp.toy.add(a=2, b=3),
                  mcp_toy_picture(), mcp_toy_fail(reason="x")]))
""")
    assert result.status == "success", result.stderr
    echo, add, picture, fail = json.loads(result.output)
    assert echo == {"result": "hihi"}
    assert add == {"total": 5, "terms": [2, 3]}  # structuredContent (output schema)
    assert picture["content"] == [
        {"type": "image", "mime_type": "image/png", "bytes": 8,
         "note": "image data not included"},
        {"type": "resource", "uri": "file:///notes.txt", "mime_type": "text/plain",
         "text": "some notes"}]
    assert set(fail) == {"error"}


def test_stub_typed_functions_and_discovery(mcp_registry):
    reg, _ = mcp_registry(toy_server("toy"))
    result = run_script(reg, """
from hermes_tools import search_tools, describe_tool, mcp
print(search_tools("add integers")[0]["name"])
print(describe_tool("mcp_toy_slow")["signature"])
print(describe_tool("mcp_toy_slw")["error"])
print(mcp.toy.echo.__doc__)
""")
    assert result.status == "success", result.stderr
    lines = result.output.splitlines()
    assert lines[0] == "mcp_toy_add"
    assert lines[1] == "mcp_toy_slow(seconds: float, tag: str) -> dict"
    assert "mcp_toy_slow" in lines[2]
    assert lines[3] == "Return the text unchanged."


def test_env_expansion_reaches_the_server_not_the_script(mcp_registry):
    servers = toy_server("toy", env="{TOY_SECRET: '${HOST_SECRET}'}")
    reg, _ = mcp_registry(servers, environ={"HOST_SECRET": "s3cr3t-value", "PATH": "/usr/bin"})
    result = run_script(reg, """
import os
from hermes_tools import mcp
print(mcp.toy.env(name="TOY_SECRET")["result"])
print("s3cr3t-value" in repr(dict(os.environ)))
""")
    assert result.output.split() == ["s3cr3t-value", "False"]


def test_unset_variable_is_an_error_naming_file_line_and_key(mcp_registry, tmp_path):
    reg, manager = mcp_registry(toy_server("toy", env="{T: '${NOT_SET_ANYWHERE}'}"),
                                environ={})
    err = reg.load_errors["mcp server toy"]
    assert f"{tmp_path / 'config.yaml'}:7: mcp_servers.toy.env.T" in err
    assert "${NOT_SET_ANYWHERE} is not set" in err
    assert manager.status()[0].state == "failed"
    assert "${NOT_SET_ANYWHERE} is not set" in manager.status()[0].error


def test_crash_mid_call_gives_a_clear_error_and_the_server_comes_back(mcp_registry):
    reg, manager = mcp_registry(toy_server("toy") + toy_server("other"))
    crashed = json.loads(reg.dispatch("mcp_toy_crash", {}))
    assert "exited or closed the connection during the call to 'crash'" in crashed["error"]
    # the other server lost nothing, and the crashed one is restarted for the next call
    assert json.loads(reg.dispatch("mcp_other_echo", {"text": "b"})) == {"result": "b"}
    assert json.loads(reg.dispatch("mcp_toy_echo", {"text": "a"})) == {"result": "a"}
    status = {s.name: s for s in manager.status()}
    assert status["toy"].restarts == 1 and status["toy"].state == "ready"
    assert status["other"].restarts == 0


def test_hung_call_times_out_while_other_calls_proceed_on_the_same_connection(mcp_registry):
    reg, _ = mcp_registry(toy_server("toy", timeout="2"))
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        hung = pool.submit(reg.dispatch, "mcp_toy_hang", {})
        started = time.monotonic()
        quick = [pool.submit(reg.dispatch, "mcp_toy_slow", {"seconds": 0.2, "tag": str(i)})
                 for i in range(3)]
        assert [json.loads(f.result())["result"] for f in quick] == ["0", "1", "2"]
        assert time.monotonic() - started < 1.9  # answered while the hung call was pending
        error = json.loads(hung.result())["error"]
    assert "tool 'hang' did not answer within 2s" in error
    assert json.loads(reg.dispatch("mcp_toy_echo", {"text": "ok"})) == {"result": "ok"}


def test_server_that_never_starts_fails_clearly_and_others_work(mcp_registry):
    servers = (toy_server("never", "--never-start", connect_timeout="1.5")
               + toy_server("toy"))
    started = time.monotonic()
    reg, manager = mcp_registry(servers)
    assert time.monotonic() - started < 30
    assert "did not start and finish its handshake within 1.5s" in \
        reg.load_errors["mcp server never"]
    assert not any(n.startswith("mcp_never_") for n in reg.names())
    assert json.loads(reg.dispatch("mcp_toy_echo", {"text": "x"})) == {"result": "x"}
    assert {s.name: s.state for s in manager.status()} == {"never": "failed", "toy": "ready"}


def test_missing_command_is_a_clear_error(mcp_registry):
    reg, _ = mcp_registry("  gone:\n    command: /nonexistent/mcp-server\n")
    assert "command not found: /nonexistent/mcp-server" in reg.load_errors["mcp server gone"]


def test_list_changed_refreshes_the_registry(mcp_registry):
    reg, _ = mcp_registry(toy_server("toy"))
    assert "mcp_toy_grown" not in reg
    assert json.loads(reg.dispatch("mcp_toy_grow", {})) == {"result": "ok"}
    deadline = time.monotonic() + 10
    while "mcp_toy_grown" not in reg and time.monotonic() < deadline:
        time.sleep(0.02)
    assert json.loads(reg.dispatch("mcp_toy_grown", {})) == {"result": "grown here"}


def test_include_exclude_filters(mcp_registry):
    servers = toy_server("toy", tools="{include: [echo, add, hang], exclude: [hang]}")
    reg, _ = mcp_registry(servers)
    assert sorted(n for n in reg.names() if n.startswith("mcp_")) == \
        ["mcp_toy_add", "mcp_toy_echo"]


def test_lazy_server_with_a_cached_catalogue_starts_on_first_call(mcp_registry):
    reg, manager = mcp_registry(toy_server("toy"))
    assert manager.status()[0].catalogue == "live"
    reg.close()
    reg2, manager2 = mcp_registry(toy_server("toy"))
    status = manager2.status()[0]
    assert (status.state, status.catalogue) == ("stopped", "cached")
    assert "mcp_toy_echo" in reg2
    assert json.loads(reg2.dispatch("mcp_toy_echo", {"text": "z"})) == {"result": "z"}
    assert manager2.status()[0].state == "ready"


def test_eager_server_ignores_the_cache(mcp_registry):
    mcp_registry(toy_server("toy"))[0].close()
    _, manager = mcp_registry(toy_server("toy", startup="eager"))
    assert manager.status()[0].state == "ready"


def test_servers_stop_when_the_registry_closes(mcp_registry):
    import psutil

    reg, manager = mcp_registry(toy_server("toy"))
    kids = [p for p in psutil.Process().children(recursive=True)
            if TOY in " ".join(p.cmdline())]
    assert kids
    reg.close()
    _, alive = psutil.wait_procs(kids, timeout=10)
    assert alive == []
    assert "closed" in json.loads(reg.dispatch("mcp_toy_echo", {"text": "x"}))["error"] or \
        manager.status()[0].state == "closed"


def test_disabled_server_is_listed_but_not_started(mcp_registry):
    reg, manager = mcp_registry(toy_server("toy", enabled="false"))
    assert not any(n.startswith("mcp_") for n in reg.names())
    assert [(s.name, s.state) for s in manager.status()] == [("toy", "disabled")]


def test_stderr_goes_to_the_log(mcp_registry, caplog):
    import logging

    caplog.set_level(logging.INFO, logger="execengine.mcp.connection")
    mcp_registry(toy_server("toy"))
    assert any("MCP server toy stderr: toy: started pid" in r.getMessage()
               for r in caplog.records)


@pytest.mark.parametrize("bad, message", [
    ("  x:\n    args: [a]\n", "give either command"),
    ("  x:\n    command: a\n    url: http://h/mcp\n", "give either command"),
    ("  x:\n    command: a\n    timout: 3\n", "did you mean 'timeout'"),
    ("  x y:\n    command: a\n", "names here are letters"),
    ("  x:\n    command: a\n    env: {A: [1]}\n", "expected a string"),
    ("  x:\n    command: a\n    env: {A: '${1x}'}\n", "must hold an environment variable"),
    ("  x:\n    url: ftp://h\n", "url must start with http"),
    ("  x:\n    command: a\n    tools: {include: 3}\n", "expected a list of strings"),
    ("  x:\n    command: a\n    startup: soon\n", "expected one of 'lazy', 'eager'"),
])
def test_bad_config_names_file_line_and_key(bad, message):
    from execengine.config import parse_config as parse
    from execengine.errors import ConfigError

    with pytest.raises(ConfigError, match="c.yaml:[0-9]+:[0-9]+: mcp_servers.x") as info:
        parse("mcp_servers:\n" + bad, source="c.yaml")
    assert message in str(info.value)
