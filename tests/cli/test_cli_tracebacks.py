"""``execengine run FILE``: a traceback names the user's file (not the staging copy) and
appears once (it used to be printed on stdout, inside the output, and again on stderr)."""

from __future__ import annotations

import pytest
from _cli import cli

from execengine.isolation.detect import detect

REPORT = detect()
LEVELS = [pytest.param(lv, id=lv, marks=pytest.mark.skipif(
    not REPORT.levels.get(lv), reason=f"level {lv}: {REPORT.reasons.get(lv)}"))
    for lv in ("none", "restricted", "isolated")]


@pytest.mark.parametrize("level", LEVELS)
def test_a_syntax_error_names_the_file_once(level, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("print('never')\nx = (\n")
    done = cli(tmp_path, "run", "--isolation", level, "bad.py")
    assert done.returncode == 1
    both = done.stdout + done.stderr
    assert both.count("SyntaxError") == 1, both
    assert f'File "{bad}", line 2' in done.stderr
    assert "execengine-run-" not in both and "script.py" not in both
    assert done.stdout == ""


@pytest.mark.parametrize("level", LEVELS)
def test_a_runtime_error_shows_the_files_lines_once(level, tmp_path):
    (tmp_path / "sub").mkdir()
    script = tmp_path / "sub" / "fails.py"
    script.write_text("def f():\n    return 1 / 0\nprint('before')\nf()\n")
    # strict mode: the script runs in a private folder, where its path does not exist
    done = cli(tmp_path, "run", "--isolation", level, "--mode", "strict", "sub/fails.py")
    assert done.returncode == 1
    assert done.stdout == "before\n"
    assert done.stderr.count("Traceback (most recent call last)") == 1, done.stderr
    assert f'File "{script}", line 2, in f\n    return 1 / 0\n' in done.stderr
    assert "--- stderr ---" not in done.stdout + done.stderr


def test_code_from_c_and_stdin_is_named_as_python_names_it(tmp_path):
    done = cli(tmp_path, "run", "--isolation", "none", "-c", "1/0")
    assert 'File "<string>", line 1' in done.stderr
    done = cli(tmp_path, "run", "--isolation", "none", "-", stdin="\n1/0\n")
    assert 'File "<stdin>", line 2' in done.stderr


def test_an_exit_code_without_stderr_is_still_explained(tmp_path):
    done = cli(tmp_path, "run", "--isolation", "none", "-c", "import os; os._exit(3)")
    assert done.returncode == 3
    assert "Script exited with code 3" in done.stderr
