"""Real third-party MCP servers: mcp-server-time and mcp-server-git (PyPI), and
@modelcontextprotocol/server-everything (npm, where node is present).

CI installs server-everything (.ci/run) and sets EXECENGINE_REQUIRE_NODE_MCP=1, which turns
a missing package into a failure; elsewhere the test is skipped only when node is absent
or the package was not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from _mcp_helpers import BIN, run_script

ROOT = Path(__file__).resolve().parents[2]


def test_time_server_called_from_a_script(mcp_registry):
    servers = (f"  time:\n    command: {BIN / 'mcp-server-time'}\n"
               "    args: [--local-timezone, UTC]\n")
    reg, _ = mcp_registry(servers)
    assert {"mcp_time_get_current_time", "mcp_time_convert_time"} <= set(reg.names())
    result = run_script(reg, """
from hermes_tools import mcp_time_get_current_time, mcp
now = mcp_time_get_current_time(timezone="Europe/Paris")
conv = mcp.time.convert_time(source_timezone="UTC", time="12:00",
                             target_timezone="Asia/Tokyo")
print(now["timezone"], conv["target"]["datetime"][11:16])
""")
    assert result.status == "success", result.stderr
    assert result.output.split() == ["Europe/Paris", "21:00"]


def test_git_server_called_from_a_script(mcp_registry, tmp_path):
    if shutil.which("git") is None:
        pytest.fail("git is required for mcp-server-git")
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("hello\n")
    subprocess.run(["git", "-C", str(repo), "add", "a.txt"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "first commit"], check=True,
                   env=env)
    (repo / "b.txt").write_text("new\n")
    servers = f"  git:\n    command: {BIN / 'mcp-server-git'}\n    args: [--repository, {repo}]\n"
    reg, _ = mcp_registry(servers)
    assert "mcp_git_git_status" in reg and "mcp_git_git_log" in reg
    result = run_script(reg, f"""
from hermes_tools import mcp
status = mcp.git.git_status(repo_path={str(repo)!r})
log = mcp.git.git_log(repo_path={str(repo)!r}, max_count=1)
print("b.txt" in str(status), "first commit" in str(log))
""")
    assert result.status == "success", result.stderr
    assert result.output.split() == ["True", "True"]


def _everything() -> Path | None:
    prefix = os.environ.get("EXECENGINE_NODE_MCP_PREFIX", str(ROOT / ".ci" / "node"))
    exe = Path(prefix) / "node_modules" / ".bin" / "mcp-server-everything"
    return exe if exe.exists() else None


def test_everything_server_from_npm(mcp_registry):
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    exe = _everything()
    if exe is None:
        message = ("@modelcontextprotocol/server-everything is not installed (npm install "
                   "--prefix .ci/node @modelcontextprotocol/server-everything)")
        if os.environ.get("EXECENGINE_REQUIRE_NODE_MCP") == "1":
            pytest.fail(message)
        pytest.skip(message)
    reg, manager = mcp_registry(f"  everything:\n    command: {exe}\n    args: [stdio]\n"
                                "    connect_timeout: 40\n")
    assert manager.status()[0].state == "ready", reg.load_errors
    assert "mcp_everything_echo" in reg
    result = run_script(reg, """
from hermes_tools import mcp
import json
print(json.dumps([mcp.everything.echo(message="hi from a script"),
                  mcp.everything.get_sum(a=2, b=40)]))
""")
    assert result.status == "success", result.stderr
    echo, total = json.loads(result.output)
    assert "hi from a script" in json.dumps(echo)
    assert "42" in json.dumps(total)
