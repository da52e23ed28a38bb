"""The command line's own options: ``--version``, the global options after the command,
and an unknown option reported by the command it was given to."""

from __future__ import annotations

import re

import pytest
from _cli import REPO, cli


def _pyproject_version() -> str:
    text = (REPO / "pyproject.toml").read_text()
    found = re.search(r'^version = "([^"]+)"$', text, re.M)
    assert found
    return found.group(1)


@pytest.mark.parametrize("args", [["--version"], ["version"]])
def test_version(tmp_path, args):
    done = cli(tmp_path, *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"execengine {_pyproject_version()} (Python 3.")
    assert str(REPO / "execengine") in done.stdout


@pytest.mark.parametrize("where", ["before", "after"])
def test_config_is_taken_before_or_after_the_command(tmp_path, where):
    cfg = tmp_path / "x.yaml"
    cfg.write_text("code_execution:\n  timeout: 7\n")
    option = ["--config", str(cfg)]
    args = [*option, "config", "show"] if where == "before" else ["config", "show", *option]
    done = cli(tmp_path, *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"# config file: {cfg}\n")
    assert re.search(r"\ncode_execution\.timeout +7\.0 +line 2\n", done.stdout)
    done = cli(tmp_path, "config", "check", *option)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{cfg}: ok")


def test_the_global_options_after_run_are_both_taken(tmp_path):
    cfg = tmp_path / "x.yaml"
    cfg.write_text("code_execution:\n  python: /nonexistent/python\n")
    done = cli(tmp_path, "run", "--isolation", "none", "-c", "print(1)", "--config", str(cfg),
               "-v")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1\n"
    # the config's interpreter was tried (and found unusable), said at debug level
    assert "DEBUG execengine.engine.interpreter: interpreter /nonexistent/python" in done.stderr


@pytest.mark.parametrize("args, usage", [
    (["run", "-c", "1", "--bogus"], "usage: execengine run "),
    (["run", "--bogus"], "usage: execengine run "),
    (["config", "show", "--bogus"], "usage: execengine config show "),
    (["bench", "tokens", "--bogus"], "usage: execengine bench tokens "),
])
def test_an_unknown_option_shows_the_commands_usage(tmp_path, args, usage):
    done = cli(tmp_path, *args)
    assert done.returncode == 2
    assert done.stderr.startswith(usage), done.stderr
    assert "usage: execengine [-h]" not in done.stderr
