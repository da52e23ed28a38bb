"""Tracebacks name the code as its author knows it: ``<execute_code>`` for a model's code,
the ``filename`` given to :meth:`Engine.execute` otherwise; never the staging copy. The
lines are shown (they come from ``linecache``: the name is no file the child can read)."""

from __future__ import annotations

import pytest

from execengine.config import Config
from execengine.engine import Engine
from execengine.isolation.detect import detect

REPORT = detect()
LEVELS = [pytest.param(lv, id=lv, marks=pytest.mark.skipif(
    not REPORT.levels.get(lv), reason=f"level {lv}: {REPORT.reasons.get(lv)}"))
    for lv in ("none", "restricted", "isolated")]

PRESTARTED = "'<execengine ' + 'zygote>' in open('/proc/self/cmdline').read()"
FAILS = f"print({PRESTARTED})\ndef f():\n    return {{}}['missing']\nf()\n"


@pytest.fixture
def engine(request):
    level = request.param
    with Engine(Config().with_overrides({
            "code_execution.isolation": level, "code_execution.min_isolation": level},
            origin="test")) as eng:
        yield eng


@pytest.mark.parametrize("engine", LEVELS, indirect=True)
def test_a_models_code_is_execute_code(engine, tmp_path):
    # in a folder of its own: a working directory holding the interpreter's site (an
    # editable install's checkout) is never given a pre-started interpreter
    result = engine.execute(FAILS, timeout=30, cwd=str(tmp_path))
    assert result.status == "error"
    # at isolated the name came through a pre-started interpreter's plan
    assert result.output.startswith(str(engine.launcher.level == "isolated")), result.output
    assert ('  File "<execute_code>", line 4, in <module>\n    f()\n'
            '  File "<execute_code>", line 3, in f\n    return {}[\'missing\']\n'
            ) in result.stderr
    assert "execengine-run-" not in result.stderr + result.output
    assert "KeyError: 'missing'" in result.stderr


@pytest.mark.parametrize("engine", LEVELS, indirect=True)
def test_the_given_filename_is_used(engine):
    result = engine.execute("x = (\n", filename="/home/me/job.py", timeout=30)
    assert result.status == "error"
    assert result.stderr.startswith('  File "/home/me/job.py", line 1\n    x = (\n')


@pytest.mark.parametrize("engine", LEVELS[:1], indirect=True)
def test_a_hook_the_script_set_still_reports_and_warnings_use_the_name(engine):
    code = ("import sys, warnings\nwarnings.warn('careful')\n"
            "sys.excepthook = lambda t, v, tb: print('hook:', tb.tb_frame.f_code.co_filename,"
            " file=sys.stderr)\nraise ValueError\n")
    result = engine.execute(code, timeout=30)
    assert "<execute_code>:2: UserWarning: careful" in result.stderr
    assert "hook: <execute_code>" in result.stderr
