from __future__ import annotations

import json
import os
import time

import psutil
import pytest

from execengine.errors import SandboxError
from execengine.launch.base import LaunchSpec
from execengine.launch.local import LocalLauncher
from execengine.proctree import RUN_TOKEN_VAR, carriers


def _read_pids(path, n, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            lines = path.read_text().split("\n")
            pids = {ln.split()[0]: int(ln.split()[1]) for ln in lines if ln.strip()}
            if len(pids) >= n:
                return pids
        time.sleep(0.02)
    raise AssertionError(f"children did not report: {path.read_text() if path.exists() else ''}")


def test_env_exact_stdin_null_new_session_fds_closed(spec_for, tmp_path):
    r, w = os.pipe()
    try:
        spec = spec_for("env_dump.py", {"ONLY": "this"}, pass_fds=(r,))
        with LocalLauncher().launch(spec) as child:
            out = child.stdout.read()
            assert child.wait(10) == 0
        info = json.loads(out)
        # exactly the given environment (Python itself may coerce a C locale to LC_CTYPE)
        assert set(info["env"]) - set(spec.env) <= {"LC_CTYPE"}
        assert {k: info["env"][k] for k in spec.env} == dict(spec.env)
        assert info["env"]["ONLY"] == "this"
        assert info["stdin"] == ""
        assert info["sid"] == info["pid"]
        assert info["cwd"] == str(tmp_path)
        assert r in info["fds"] and w not in info["fds"]
        assert set(info["fds"]) <= {0, 1, 2, r, 3, 4}  # 3/4: listdir's own fd at most
    finally:
        os.close(r)
        os.close(w)


def test_relative_interpreter_is_refused(tmp_path):
    spec = LaunchSpec(argv=["python3", "-c", "pass"], env={}, cwd=str(tmp_path), run_token="x")
    with pytest.raises(SandboxError, match="absolute"):
        LocalLauncher().launch(spec)


def test_missing_interpreter_is_a_sandbox_error(tmp_path):
    spec = LaunchSpec(argv=["/nonexistent/python"], env={}, cwd=str(tmp_path), run_token="x")
    with pytest.raises(SandboxError, match="cannot start"):
        LocalLauncher().launch(spec)


def test_sigterm_ignoring_child_survives_terminate_not_kill(spec_for):
    child = LocalLauncher().launch(spec_for("ignore_sigterm.py"))
    try:
        assert child.stdout.readline() == b"ready\n"
        child.terminate()
        assert child.wait(0.3) is None  # ignored
        t0 = time.monotonic()
        child.kill()
        assert time.monotonic() - t0 < 3
        assert child.poll() == -9
    finally:
        child.close()
        child.close()


@pytest.mark.parametrize("subreaper", ["1", "0"])
def test_setsid_and_double_fork_descendants_are_all_killed(spec_for, tmp_path, subreaper):
    report = tmp_path / "pids"
    spec = spec_for("double_fork.py", {"CHILD_REPORT": str(report), "SUBREAPER": subreaper,
                                       "MAIN_STAYS": "1"})
    child = LocalLauncher().launch(spec)
    try:
        pids = _read_pids(report, 2)
        assert len(carriers(RUN_TOKEN_VAR, spec.run_token)) >= 3
        for pid in pids.values():
            assert os.getsid(pid) != child.pid  # they left the session
    finally:
        child.close()
    assert carriers(RUN_TOKEN_VAR, spec.run_token) == []
    for pid in pids.values():
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"


def test_descendants_holding_stdout_do_not_outlive_close(spec_for, tmp_path):
    report = tmp_path / "pids"
    spec = spec_for("double_fork.py", {"CHILD_REPORT": str(report)})
    child = LocalLauncher().launch(spec)
    assert child.stdout.readline() == b"main done\n"
    assert child.wait(5) == 0  # main is gone, the strays still hold the pipe
    _read_pids(report, 2)
    child.kill()
    # every writer is dead: the pipe reaches EOF at once
    assert child.stdout.read() == b""
    child.close()
    assert carriers(RUN_TOKEN_VAR, spec.run_token) == []
