"""``execengine run --mode strict --cwd D`` is refused: strict mode runs the script in a
private folder, and ``--cwd`` used to be dropped without a word."""

from __future__ import annotations

from _cli import cli

WHERE = "import os; print(os.getcwd())"


def test_strict_mode_and_cwd_are_refused_together(tmp_path):
    done = cli(tmp_path, "run", "--isolation", "none", "--mode", "strict", "--cwd",
               str(tmp_path), "-c", WHERE)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("usage: execengine run ")
    assert "--cwd cannot be used with --mode strict" in done.stderr


def test_strict_mode_from_the_config_is_named(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("code_execution:\n  mode: strict\n")
    done = cli(tmp_path, "--config", str(cfg), "run", "--isolation", "none", "--cwd",
               str(tmp_path), "-c", WHERE)
    assert done.returncode == 2
    assert f"strict mode (code_execution.mode, {cfg}:2)" in done.stderr


def test_cwd_is_used_in_project_mode(tmp_path):
    (tmp_path / "d").mkdir()
    done = cli(tmp_path, "run", "--isolation", "none", "--mode", "project", "--cwd",
               str(tmp_path / "d"), "-c", WHERE)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{tmp_path / 'd'}\n"
