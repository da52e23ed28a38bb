"""Hermes Agent: the plugin, found by Hermes' own plugin manager through the entry point
execengine declares, replaces the built-in ``execute_code``; the reference's behaviours are
checked through Hermes' real dispatcher (``hermes_driver.py``, run once, under the
reference's interpreter).

The interpreter is the reference venv that .ci/run builds (``EXECENGINE_BENCH_REFERENCE``,
default ``.ci/reference/bin/python``): hermes-agent brings top-level packages (``tools``,
``agent``, ``utils``...) that stay out of the test interpreter. A missing interpreter fails
the tests unless ``EXECENGINE_INTEGRATIONS_OPTIONAL=1``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _integration_helpers import OPTIONAL_VAR

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("hermes_driver.py")
GROUP = "hermes_agent.plugins"


def reference_python() -> str:
    path = os.environ.get("EXECENGINE_BENCH_REFERENCE") or str(
        ROOT / ".ci" / "reference" / "bin" / "python")
    if not os.access(path, os.X_OK):
        message = (f"no interpreter with hermes-agent at {path} (.ci/run builds it; or set "
                   "EXECENGINE_BENCH_REFERENCE)")
        if os.environ.get(OPTIONAL_VAR) == "1":
            pytest.skip(message)
        pytest.fail(message)
    return path


def declared_entry_point() -> str:
    """``execengine = "<module>"`` under the group's table in pyproject.toml."""
    text = (ROOT / "pyproject.toml").read_text()
    found = re.search(rf'^\[project\.entry-points\."{re.escape(GROUP)}"\]\n'
                      r'execengine = "([\w.]+)"$', text, re.MULTILINE)
    assert found, f"pyproject.toml declares no {GROUP} entry point named execengine"
    return found.group(1)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    python = reference_python()
    work = tmp_path_factory.mktemp("hermes")
    home, files = work / "hermes-home", work / "files"
    home.mkdir()
    files.mkdir()
    (home / "config.yaml").write_text(
        "plugins:\n  enabled: [execengine]\n"
        "  entries:\n    execengine:\n      allow_tool_override: true\n")
    engine_config = work / "execengine.yaml"
    engine_config.write_text("code_execution:\n  timeout: 3\n  max_tool_calls: 12\n")
    # the entry point as pyproject.toml declares it, on the driver's path (the editable
    # install may predate it): Hermes scans importlib.metadata as for any pip plugin
    dist = work / "site" / "execengine_hermes_plugin-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: execengine-hermes-plugin\n"
                                   "Version: 0\n")
    (dist / "entry_points.txt").write_text(f"[{GROUP}]\nexecengine = "
                                           f"{declared_entry_point()}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "EXECENGINE_"))}
    env.update(HERMES_HOME=str(home), EXECENGINE_CONFIG=str(engine_config),
               PYTHONPATH=os.pathsep.join([str(ROOT), str(work / "site")]),
               TERMINAL_CWD=str(files))
    done = subprocess.run([python, str(DRIVER), str(files)], env=env, cwd=files,
                          capture_output=True, text=True, timeout=45)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_hermes_loads_the_plugin_and_its_execute_code_replaces_the_builtin(results):
    assert results["plugins"] == {"execengine": {"enabled": True, "error": None}}
    assert results["handler_module"] == "execengine.integrations.hermes"


def test_basic_print(results):
    r = results["basic"]
    assert (r["status"], r["output"], r["tool_calls_made"]) == ("success", "hello world\n", 0)


def test_one_tool_call_through_hermes_terminal(results):
    r = results["one_call"]
    assert r["status"] == "success" and "hello" in r["output"] and r["tool_calls_made"] == 1


def test_concurrent_calls_each_get_their_own_reply(results):
    assert results["concurrent"]["output"] == "OK 10/10\n"


def test_a_failing_script_reports_its_traceback(results):
    r = results["failing"]
    assert r["status"] == "error"
    assert "before error" in r["output"] and "RuntimeError: deliberate crash" in r["error"]


def test_helpers(results):
    assert results["helpers"]["output"] == "caught: nope\n"


def test_timeout_message(results):
    # a cell of a session is stopped, not killed, and the session keeps its state
    # (docs/sessions.md); the reference's first sentence and its place in the output stay
    r = results["timeout"]
    message = ("Script timed out after 3s and was interrupted (KeyboardInterrupt). "
               "The session's state was kept.")
    assert (r["status"], r["error"]) == ("timeout", message)
    assert r["output"] == "started\n\n⏰ " + message


def test_tool_call_limit(results):
    printed = results["limit"]["output"]
    assert printed.count("'data'") == 12 and printed.count("'error'") == 2


def test_a_tool_outside_the_set(results):
    assert ("Tool 'read_file' is not available in execute_code. Available: terminal"
            in results["outside_set"]["output"])


def test_empty_code(results):
    assert results["empty"]["error"] == "No code provided."


def test_the_child_environment(results):
    names = json.loads(results["environment"]["output"])
    assert "HERMES_RPC_SOCKET" in names and "OPENAI_API_KEY" not in names


def test_a_tool_error_is_hermes_own_error_result(results):
    # Hermes' dispatcher formats (and marks) a failing handler's error; the script gets it
    assert json.loads(results["tool_error"]["output"].replace("'", '"')) == {
        "error": "[TOOL_ERROR] Tool execution failed: RuntimeError: the service is down"}


def test_mcp_tools_are_callable_and_grouped(results):
    r = results["mcp"]
    assert r["status"] == "success", r
    assert r["output"] == ("{'echo': 'hi', 'task': 't-mcp'} {'echo': 'yo', 'task': 't-mcp'}\n")


def test_no_enabled_script_tool_fails_closed(results):
    r = results["fail_closed"]
    assert r["status"] == "error" and "unavailable" in r["error"]


def test_a_session_keeps_variables_per_hermes_session(results):
    assert results["session_2"]["output"] == "42\n"
    assert results["session_other"]["output"] == "False\n"


def test_real_file_tools(results):
    assert results["real_files"]["output"] == "8 True\n"


def test_hermes_interrupt_stops_the_script(results):
    r = results["interrupt"]
    assert r["status"] == "interrupted"
    assert "interrupted" in r["output"] and "should not reach" not in r["output"]
    assert results["interrupt_seconds"] < 20


def test_the_module_imports_without_hermes():
    # this interpreter has no hermes-agent: the plugin module still imports
    done = subprocess.run([sys.executable, "-c", "import execengine.integrations.hermes"],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True)
    assert done.returncode == 0, done.stderr
