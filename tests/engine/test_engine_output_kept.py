"""What a script printed before a timeout, an interrupt or a kill is in the result, at
every level, in one-shot executions (at ``isolated`` in an interpreter started ahead,
``sandbox/zygote.py``, whose standard streams were made before the plan came) and in
session cells whose kernel is killed. The child used to write stdout block-buffered: what
sat in the buffer died with it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from execengine.config import Config
from execengine.engine import Engine
from execengine.isolation.detect import detect

REPORT = detect()
LEVELS = [pytest.param(lv, id=lv, marks=pytest.mark.skipif(
    not REPORT.levels.get(lv), reason=f"level {lv}: {REPORT.reasons.get(lv)}"))
    for lv in ("none", "restricted", "isolated")]

#: True when the script runs in an interpreter a warm entry started ahead
PRESTARTED = "'<execengine ' + 'zygote>' in open('/proc/self/cmdline').read()"


@pytest.fixture
def engine(request):
    level = request.param
    with Engine(Config().with_overrides({
            "code_execution.isolation": level, "code_execution.min_isolation": level,
            "code_execution.kill_grace": 1.0}, origin="test")) as eng:
        yield eng


def _set_when_exists(path: Path, event: threading.Event) -> threading.Thread:
    def watch() -> None:
        deadline = time.monotonic() + 30
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        event.set()

    t = threading.Thread(target=watch)
    t.start()
    return t


@pytest.mark.parametrize("engine", LEVELS, indirect=True)
def test_output_before_a_timeout_is_kept(engine, tmp_path):
    level = engine.launcher.level
    code = (f"import time\nprint('start', {PRESTARTED})\nprint('partial', end='')\n"
            "time.sleep(60)\n")
    # in a folder of its own: a working directory holding the interpreter's site (an
    # editable install's checkout) is never given a pre-started interpreter
    result = engine.execute(code, timeout=4, cwd=str(tmp_path))
    assert result.status == "timeout"
    first, _, rest = result.output.partition("\n")
    # at isolated the script ran where the setting had to come from the start-up
    assert first == f"start {level == 'isolated'}", result.output
    assert rest.startswith("partial\n\n⏰ Script timed out"), result.output


@pytest.mark.parametrize("engine", LEVELS, indirect=True)
def test_output_before_an_interrupt_is_kept(engine, tmp_path):
    stop = threading.Event()
    watcher = _set_when_exists(tmp_path / "started", stop)
    code = ("import time\nprint('before', end='')\nopen('started', 'w').close()\n"
            "time.sleep(60)\n")
    try:
        result = engine.execute(code, cwd=str(tmp_path), mode="project", interrupt=stop,
                                timeout=40)
    finally:
        stop.set()
        watcher.join()
    assert result.status == "interrupted"
    assert result.output.startswith("before\n[execution interrupted"), result.output


@pytest.mark.parametrize("engine", LEVELS, indirect=True)
def test_output_before_the_script_is_killed_is_kept(engine):
    code = ("import os, signal, sys\nprint('out', end='')\nsys.stderr.write('err')\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    result = engine.execute(code, timeout=30)
    assert result.status == "error"
    assert result.exit_code == -9
    assert result.output.startswith("out"), result.output
    assert result.stderr == "err"


@pytest.mark.parametrize("engine", LEVELS, indirect=True)
def test_a_cell_whose_kernel_is_killed_keeps_its_output(engine):
    """The cell ignores the interrupt a timeout sends first, so the kernel is killed."""
    code = ("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            "print('cell', end='')\ntime.sleep(60)\n")
    result = engine.execute(code, session="s", timeout=3)
    assert result.status == "timeout"
    assert "state was lost" in (result.error or "")
    assert result.output.startswith("cell\n\n"), result.output
