"""What a script counts on when it ends, at every level (``bootstrap.quick_exit``).

The child does not tear its interpreter down at exit (in an interpreter forked from the
template the teardown copied most of the pages it shares with it, 3 ms of CPU an
execution): it does what the interpreter's exit does that a script can see. Each case
would fail with a bare ``os._exit`` after the script: a file left open (in ``__main__``
or in a module of the script's) keeps what was written, a ``__main__`` object's
finalizer runs, ``atexit`` handlers run, threads that are not daemons are waited for,
``sys.exit`` gives its status and message, a line without a newline is printed; and a
script that leaves a daemon thread running (which the interpreter stops before it tears
anything down) gets the interpreter's own exit: without it the daemon fails once the
script's globals are released.
"""

from __future__ import annotations

import pytest
from _session_helpers import level_params

from execengine.config import Config
from execengine.engine.core import Engine

CASES = {
    "file in __main__": (
        "f = open('out.txt', 'w')\nf.write('kept')\n", "", "kept"),
    "file in a module": (
        "import helper\nhelper.log.write('kept too')\n", "", "kept too"),
    "finalizer": (
        "class Noisy:\n    def __del__(self):\n        print('finalized')\nn = Noisy()\n",
        "finalized\n", None),
    "atexit": (
        "import atexit\natexit.register(lambda: print('atexit ran'))\n", "atexit ran\n", None),
    "thread": (
        "import threading, time\n"
        "def later():\n    time.sleep(0.2)\n    print('thread done', flush=True)\n"
        "threading.Thread(target=later).start()\n", "thread done\n", None),
    "no newline": ("print('x', end='')\n", "x", None),
}


@pytest.fixture(params=level_params())
def engine(request, tmp_path):
    cfg = Config().with_overrides({
        "code_execution.isolation": request.param, "code_execution.min_isolation": request.param,
        "code_execution.timeout": 30})
    (tmp_path / "helper.py").write_text("log = open('module.txt', 'w')\n")
    with Engine(cfg) as e:
        yield e


@pytest.mark.parametrize("case", list(CASES))
def test_what_a_script_counts_on_at_exit_happens(engine, tmp_path, case):
    code, output, written = CASES[case]
    r = engine.execute(code, cwd=str(tmp_path), mode="project")
    assert (r.status, r.output, r.exit_code) == ("success", output, 0), r
    if written is not None:
        name = "out.txt" if case == "file in __main__" else "module.txt"
        assert (tmp_path / name).read_text() == written


def test_sys_exit_gives_its_status_and_message(engine, tmp_path):
    r = engine.execute("import sys\nsys.exit(3)", cwd=str(tmp_path), mode="project")
    assert r.exit_code == 3, r
    r = engine.execute("import sys\nprint('before')\nsys.exit('bye')", cwd=str(tmp_path),
                       mode="project")
    assert (r.exit_code, r.stderr.strip()) == (1, "bye") and r.output.startswith("before\n"), r


def test_a_daemon_thread_left_running_sees_nothing_torn_down(engine, tmp_path):
    # the daemon uses a global; as the script's objects are released, a finalizer gives
    # it time to run: with the globals gone it would fail (the interpreter stops daemon
    # threads before it tears anything down)
    code = ("import threading, time\ncount = 0\n"
            "def spin():\n    global count\n    while True:\n        count += 1\n"
            "        time.sleep(0.001)\n"
            "class Slow:\n    def __del__(self):\n        import time\n"
            "        time.sleep(0.1)\n"
            "slow = Slow()\n"
            "threading.Thread(target=spin, daemon=True).start()\ntime.sleep(0.05)\n"
            "print('main done')\n")
    r = engine.execute(code, cwd=str(tmp_path), mode="project")
    assert (r.status, r.output, r.exit_code) == ("success", "main done\n", 0), r
    assert "Exception" not in r.stderr and "Traceback" not in r.stderr, r.stderr
