"""Level ``none``: a script's interpreter started ahead (``sandbox/zygote.py``).

What runs in one must behave as a fresh start would (environment, descriptors, session,
working directory, arguments, umask), be killed as completely, and never hang a launch
or outlive its host.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from execengine.errors import SandboxError
from execengine.launch import local
from execengine.launch.base import LaunchSpec
from execengine.launch.local import LocalLauncher
from execengine.proctree import RUN_TOKEN_VAR, carriers

CHILDREN = Path(__file__).resolve().parent.parent / "children"
#: ``python -c`` as the engine launches a script (what may run in an interpreter started ahead)
RUN = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"


def script_spec(cwd: Path, script: str, env: dict[str, str] | None = None,
                **kw: object) -> LaunchSpec:
    token = secrets.token_hex(8)
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), RUN_TOKEN_VAR: token,
            **(env or {})}
    return LaunchSpec(argv=[sys.executable, "-c", RUN, str(CHILDREN / script)], env=base,
                      cwd=str(cwd), run_token=token, prestart=True, **kw)  # type: ignore[arg-type]


def _run(launcher: LocalLauncher, spec: LaunchSpec) -> dict:
    with launcher.launch(spec) as child:
        out = child.stdout.read()
        assert child.wait(10) == 0, child.stderr.read()
    return json.loads(out)


def _await_prestarted(launcher: LocalLauncher, n: int = 1, timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = launcher.prestarted()
        if len(pids) >= n:
            return pids
        time.sleep(0.01)
    raise AssertionError(f"no interpreter was started ahead within {timeout} s")


def _gone(pids: list[int], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(not psutil.pid_exists(p) or psutil.Process(p).status() == "zombie"
               for p in pids):
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def launcher():
    launcher = LocalLauncher(warm=1)
    yield launcher
    pids = launcher.prestarted()
    launcher.close()
    assert _gone(pids)


def test_a_script_runs_as_a_fresh_start_would(launcher, tmp_path):
    r, w = os.pipe()
    try:
        spec = script_spec(tmp_path, "env_dump.py", {"ONLY": "this"}, pass_fds=(r,))
        cold = _run(launcher, spec)  # the first is started at launch: it teaches the key
        assert not cold["prestarted"]
        _await_prestarted(launcher)
        spec = script_spec(tmp_path, "env_dump.py", {"ONLY": "this"}, pass_fds=(r,))
        warm = _run(launcher, spec)
    finally:
        os.close(r)
        os.close(w)
    assert warm["prestarted"]
    assert warm["pid"] != cold["pid"] and warm["sid"] == warm["pid"]
    # the environment exactly as given (and as the start coerced it: LC_CTYPE for a C
    # locale), but the run token: the one the interpreter started with (what it forks
    # without an exec carries it, see below)
    def but_token(env: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in env.items() if k != RUN_TOKEN_VAR}

    assert but_token(warm["env"]) == but_token(cold["env"])
    assert set(spec.env) <= set(warm["env"]) and warm["env"]["ONLY"] == "this"
    for key in ("stdin", "cwd", "fds", "umask"):
        assert warm[key] == cold[key], key
    assert warm["argv"] == cold["argv"]
    assert r in warm["fds"]


def test_a_failed_start_is_a_sandbox_error_with_the_reason(launcher, tmp_path):
    _run(launcher, script_spec(tmp_path, "env_dump.py"))
    _await_prestarted(launcher)
    gone = tmp_path / "gone"
    with pytest.raises(SandboxError, match=r"cannot start .*(No such file|FileNotFound)"):
        launcher.launch(script_spec(gone, "env_dump.py"))
    # the same words as a start at launch
    with pytest.raises(SandboxError, match=r"cannot start .*(No such file|FileNotFound)"):
        LocalLauncher().launch(script_spec(gone, "env_dump.py"))


@pytest.mark.parametrize("token_at_start", [True, False])
def test_what_it_forks_without_exec_is_killed(launcher, tmp_path, monkeypatch,
                                              token_at_start):
    """A setsid'ed, double-forked grandchild that never execs has the environment the
    interpreter started with: the run token must be in it. (Negative control: started
    without one, the grandchild outlives the kill.)"""
    if not token_at_start:
        real = subprocess.Popen

        def no_token(*args, **kw):
            kw["env"] = {k: v for k, v in kw["env"].items() if k != RUN_TOKEN_VAR}
            return real(*args, **kw)

        monkeypatch.setattr(local.subprocess, "Popen", no_token)
    report = tmp_path / "pids"
    env = {"CHILD_REPORT": str(report)}
    with launcher.launch(script_spec(tmp_path, "env_dump.py")) as first:
        first.stdout.read()
    _await_prestarted(launcher)
    child = launcher.launch(script_spec(tmp_path, "double_fork.py", env))
    survivors: list[int] = []
    try:
        assert child.stdout.readline() == b"main done\n"
        assert child.wait(10) == 0
        pids = _wait_pids(report)
        child.close()
        survivors = [p for p in pids if not _gone([p], timeout=0.5)]
    finally:
        child.close()
        for pid in survivors:
            os.kill(pid, signal.SIGKILL)
    if token_at_start:
        assert survivors == []
        assert carriers(RUN_TOKEN_VAR, child.run_token) == []
    else:
        assert survivors, "the probe cannot tell: a grandchild without the token was killed"


def _wait_pids(path: Path, timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
            if len(lines) >= 2:
                return [int(ln.split()[1]) for ln in lines]
        time.sleep(0.02)
    raise AssertionError("the descendants did not report")


def test_a_stopped_interpreter_is_not_waited_for(launcher, tmp_path, monkeypatch):
    """A process of the host's user can stop the next interpreter: the launch starts one
    of its own after ``START_SECONDS``, and the stopped one is killed."""
    monkeypatch.setattr(local, "START_SECONDS", 0.3)
    _run(launcher, script_spec(tmp_path, "env_dump.py"))
    [stopped] = _await_prestarted(launcher)
    os.kill(stopped, signal.SIGSTOP)
    started = time.monotonic()
    info = _run(launcher, script_spec(tmp_path, "env_dump.py"))
    assert time.monotonic() - started < 20
    assert not info["prestarted"] and info["pid"] != stopped
    assert _gone([stopped])


def test_a_killed_interpreter_is_replaced_by_a_start_at_launch(launcher, tmp_path):
    _run(launcher, script_spec(tmp_path, "env_dump.py"))
    [dead] = _await_prestarted(launcher)
    os.kill(dead, signal.SIGKILL)
    assert _gone([dead])
    info = _run(launcher, script_spec(tmp_path, "env_dump.py"))
    assert info["pid"] != dead and not info["prestarted"]


def test_another_environment_is_not_run_in_it(launcher, tmp_path):
    _run(launcher, script_spec(tmp_path, "env_dump.py", {"A": "1"}))
    [old] = _await_prestarted(launcher)
    info = _run(launcher, script_spec(tmp_path, "env_dump.py", {"A": "2"}))
    assert not info["prestarted"] and info["env"]["A"] == "2"
    assert _gone([old])  # discarded: made for an environment no longer asked for


def test_not_kept_when_warm_entries_is_0(tmp_path):
    launcher = LocalLauncher(warm=0)
    try:
        for _ in range(2):
            assert not _run(launcher, script_spec(tmp_path, "env_dump.py"))["prestarted"]
        assert launcher.prestarted() == []
    finally:
        launcher.close()


def test_interpreters_started_ahead_do_not_outlive_a_killed_host(tmp_path):
    host = textwrap.dedent(f"""
        import os, signal, sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from pathlib import Path
        from test_launch_prestart import script_spec, _run, _await_prestarted
        from execengine.launch.local import LocalLauncher
        launcher = LocalLauncher(warm=2)
        _run(launcher, script_spec(Path({str(tmp_path)!r}), "env_dump.py"))
        print(*_await_prestarted(launcher, 2), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", host], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    pids = [int(p) for p in proc.stdout.split()]
    assert len(pids) == 2
    # reparented to init (or the nearest subreaper), which reaps them once they exit
    assert _gone(pids), [psutil.Process(p).cmdline()[:2] for p in pids
                         if psutil.pid_exists(p)]
