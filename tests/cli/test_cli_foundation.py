import json
import re
import subprocess
import sys

import pytest

from execengine.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(autouse=True)
def no_home_config(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("EXECENGINE_CONFIG", raising=False)


def test_help_lists_commands():
    out = subprocess.run([sys.executable, "-m", "execengine", "--help"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0
    for cmd in ("tools", "toolsets", "config"):
        assert cmd in out.stdout


def test_no_command_prints_help_and_fails(capsys):
    code, out, _ = run(capsys)
    assert code == 2
    assert "usage:" in out


def test_config_check_ok_and_bad(capsys, tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("code_execution:\n  timeout: 12\n")
    code, out, _ = run(capsys, "--config", str(good), "config", "check")
    assert code == 0
    assert "ok" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text("code_execution:\n  timeout: 12\n  max_tool_call: 3\n")
    code, _, err = run(capsys, "--config", str(bad), "config", "check")
    assert code == 2
    assert f"{bad}:3" in err
    assert "code_execution.max_tool_call" in err
    assert "did you mean 'max_tool_calls'" in err


def test_config_show_reports_origins_and_masks_secrets(capsys, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("code_execution:\n  timeout: 12\nweb:\n  brave:\n    api_key: hunter2\n")
    code, out, _ = run(capsys, "--config", str(cfg), "config", "show", "--json")
    assert code == 0
    data = json.loads(out)
    rows = {r["key"]: r for r in data["options"]}
    assert rows["code_execution.timeout"]["value"] == 12.0
    assert rows["code_execution.timeout"]["origin"] == f"{cfg}:2"
    assert rows["code_execution.max_tool_calls"]["origin"] == "default"
    assert rows["web.brave.api_key"]["value"] == "***"
    code, out, _ = run(capsys, "--config", str(cfg), "config", "show")
    assert "hunter2" not in out
    assert out.startswith(f"# config file: {cfg}\n")
    assert re.search(r"\ncode_execution\.timeout +12\.0 +line 2\n", out)


def test_tools_and_toolsets(capsys):
    code, out, _ = run(capsys, "tools", "--json")
    assert code == 0
    tools = {t["name"]: t for t in json.loads(out)["tools"]}
    assert tools["todo"]["agent_level"] is True
    code, out, _ = run(capsys, "tools", "--toolset", "agent")
    assert code == 0
    assert "memory" in out
    code, _, err = run(capsys, "tools", "--toolset", "agnet")
    assert code == 2
    assert "did you mean 'agent'" in err
    code, out, _ = run(capsys, "toolsets", "--json")
    names = {t["name"] for t in json.loads(out)}
    assert {"file", "terminal", "web", "code_execution", "coding"} <= names


@pytest.mark.parametrize("value", ["1e308", "nan", "inf"])
def test_a_run_timeout_out_of_range_is_a_clear_error(capsys, value):
    assert main(["run", "--timeout", value, "-c", "print(1)"]) == 2
    err = capsys.readouterr().err
    assert "code_execution.timeout" in err and "Traceback" not in err, err
