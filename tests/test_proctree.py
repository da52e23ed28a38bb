"""The one process-tree kill, on real processes: the launcher's child and a terminal command
that setsid, double-fork and fork slowly without end; nothing of them is left afterwards."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from execengine import proctree
from execengine.launch.base import LaunchSpec
from execengine.launch.local import LocalLauncher
from execengine.proctree import RUN_TOKEN_VAR, TERM_TOKEN_VAR, ProcessSet, carriers
from execengine.terminal import procs
from execengine.terminal.local import LocalBackend

CHILDREN = Path(__file__).resolve().parent / "children"
FORK_CHAIN = str(CHILDREN / "fork_chain.py")
BASE_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def wait_until(cond, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return bool(cond())


def gone_for_good(var: str, token: str) -> None:
    """Nothing carries the token now, nor a moment later (nothing was left to regrow)."""
    assert carriers(var, token) == []
    time.sleep(0.2)
    assert carriers(var, token) == []


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "30"], start_new_session=True)


# -- the pieces -------------------------------------------------------------------------

def test_send_never_signals_a_process_that_only_has_the_same_pid():
    p = _sleeper()
    try:
        me = proctree._stat(p.pid)
        assert me is not None and me.state != "Z"
        stranger = proctree.Proc(p.pid, me.ppid, me.pgid, me.state, me.start + 1)
        assert proctree.send(stranger, signal.SIGKILL) is False
        assert p.poll() is None and proctree.alive(p.pid, me.start)
        assert proctree.send(me, signal.SIGKILL) is True
        assert p.wait(5) == -signal.SIGKILL
        assert proctree.send(me, signal.SIGKILL) is False  # reaped: nothing holds it
    finally:
        p.kill()
        p.wait()


def test_members_are_the_tree_the_group_and_the_token_carriers():
    token = secrets.token_hex(8)
    env = {**BASE_ENV, "MARK": token}
    # a setsid'ed grandchild with the token and a grandchild that keeps the group
    script = "setsid sleep 30 & sleep 30 & echo $! ; wait"
    p = subprocess.Popen(["bash", "-c", script], env=env, start_new_session=True,
                         stdout=subprocess.PIPE)
    pset = ProcessSet.of_popen(p, "MARK", token)
    try:
        assert p.stdout is not None
        grouped = int(p.stdout.readline())
        assert wait_until(lambda: len(pset.members()) == 3, 5), pset.members()
        assert {p.pid, grouped} < set(pset.members())
        # without the token only the tree and the group are found
        assert len(ProcessSet.of_popen(p).members()) == 3  # the setsid'ed one is a child
        assert pset.kill() is True
        assert p.wait(5) == -signal.SIGKILL
        assert pset.members() == []
        gone_for_good("MARK", token)
    finally:
        p.kill()
        p.wait()
        if p.stdout is not None:
            p.stdout.close()


def test_the_group_still_counts_after_the_root_is_reaped():
    token = secrets.token_hex(8)
    # the root exits at once; its child stays in its group with the token removed
    p = subprocess.Popen(["bash", "-c", "env -u MARK sleep 30 & echo $!"],
                         env={**BASE_ENV, "MARK": token}, start_new_session=True,
                         stdout=subprocess.PIPE)
    try:
        assert p.stdout is not None
        stray = int(p.stdout.readline())
        assert p.wait(5) == 0
        pset = ProcessSet.of_popen(p, "MARK", token)
        assert wait_until(lambda: pset.members() == [stray], 5)
        assert pset.kill() is True
        assert not proctree.alive(stray)
    finally:
        if p.stdout is not None:
            p.stdout.close()


@pytest.mark.parametrize(("script", "ended_by"), [
    ("exit 0", "exit"),
    ("sleep 30; exit 1", "sigterm"),
    ("trap '' TERM; sleep 30 & sleep 30", "kill"),
])
def test_terminate_reports_the_step_that_ended_it(script, ended_by):
    p = subprocess.Popen(["bash", "-c", script], start_new_session=True)
    pset = ProcessSet.of_popen(p)
    try:
        if ended_by == "exit":
            assert p.wait(5) == 0
        else:
            assert wait_until(lambda: len(pset.members()) >= 2 or p.poll() is not None, 5)
        t0 = time.monotonic()
        assert pset.terminate(0.3) == ended_by
        assert time.monotonic() - t0 < 0.3 + proctree.SWEEP_SECONDS + 1
        assert pset.members() == []
    finally:
        p.kill()
        p.wait()


# -- the launcher's child ---------------------------------------------------------------

def _spec(tmp_path, env: dict[str, str]) -> LaunchSpec:
    token = secrets.token_hex(8)
    return LaunchSpec(argv=[sys.executable, FORK_CHAIN],
                      env={**BASE_ENV, RUN_TOKEN_VAR: token, **env},
                      cwd=str(tmp_path), run_token=token)


@pytest.mark.parametrize("mode", ["grow", "hop"])
@pytest.mark.parametrize("subreaper", ["1", "0"])
def test_launcher_child_fork_bomb_is_killed_entirely(tmp_path, mode, subreaper):
    spec = _spec(tmp_path, {"MODE": mode, "SUBREAPER": subreaper})
    child = LocalLauncher().launch(spec)
    try:
        assert child.stdout.readline() == b"ready\n", child.stderr.read()
        # grow: a tree; hop: the main process and the chain's current link
        least = 3 if mode == "grow" else 2
        assert wait_until(lambda: len(carriers(RUN_TOKEN_VAR, spec.run_token)) >= least, 5)
        t0 = time.monotonic()
        child.kill()
        took = time.monotonic() - t0
        assert took < proctree.SWEEP_SECONDS + proctree.CONFIRM_SECONDS + 1, took
        assert child.poll() == -signal.SIGKILL
        gone_for_good(RUN_TOKEN_VAR, spec.run_token)
    finally:
        child.close()


# -- the terminal command ---------------------------------------------------------------

@pytest.mark.parametrize("mode", ["grow", "hop"])
def test_terminal_command_fork_bomb_is_stopped_entirely(tmp_path, mode):
    sp = procs.spawn(f"MODE={mode} {sys.executable} {FORK_CHAIN}", cwd=str(tmp_path),
                     env=BASE_ENV)
    try:
        deadline = time.monotonic() + 5
        seen = b""
        while b"ready" not in seen and time.monotonic() < deadline:
            try:
                seen += os.read(sp.out_fd, 4096)
            except BlockingIOError:
                time.sleep(0.01)
        assert b"ready" in seen
        least = 3 if mode == "grow" else 2
        assert wait_until(lambda: len(carriers(TERM_TOKEN_VAR, sp.token)) >= least, 5)
        assert procs.stop(sp, grace=0.2) in ("sigterm", "kill")
        assert sp.popen.returncode is not None
        gone_for_good(TERM_TOKEN_VAR, sp.token)
    finally:
        procs.kill_rest(sp)
        sp.close_fds()


def test_terminal_command_that_traps_sigterm_needs_the_kill(tmp_path):
    sp = procs.spawn("trap '' TERM; setsid sleep 30 & sleep 30", cwd=str(tmp_path),
                     env=BASE_ENV)
    try:
        assert wait_until(lambda: len(carriers(TERM_TOKEN_VAR, sp.token)) >= 3, 5)
        assert procs.stop(sp, grace=0.2) == "kill"
        gone_for_good(TERM_TOKEN_VAR, sp.token)
    finally:
        procs.kill_rest(sp)
        sp.close_fds()


def test_backend_timeout_leaves_no_process_of_the_command(tmp_path):
    mark = secrets.token_hex(8)
    with LocalBackend(kill_grace=0.2) as backend:
        result = backend.run(f"MODE=grow {sys.executable} {FORK_CHAIN}", cwd=str(tmp_path),
                             env={**BASE_ENV, "MARK": mark}, timeout=1.0,
                             max_output_chars=10_000)
    assert result.timed_out
    gone_for_good("MARK", mark)


@pytest.mark.parametrize(("root", "last", "inside", "outside"), [
    (1000, 1500, [1000, 1200, 1500], [300, 999, 1501, 4_000_000]),
    # allocation wrapped at pid_max and goes on from the reserved pids
    (4_000_000, 500, [4_000_000, 4_194_000, 301, 500], [501, 3_999_999]),
])
def test_a_scan_reads_only_the_pids_allocated_since_the_root(monkeypatch, root, last,
                                                            inside, outside):
    monkeypatch.setattr(proctree, "_pid_max", lambda: 4_194_304)
    monkeypatch.setattr(proctree, "_last_pid", lambda: last)
    monkeypatch.setattr(proctree, "_forks", lambda: 10_000)
    newer = proctree.allocated_since(root, 9_000)
    assert newer is not None
    assert [p for p in inside if newer(p)] == inside
    assert [p for p in outside if newer(p)] == []


def test_every_pid_counts_when_allocation_may_have_come_round(monkeypatch):
    monkeypatch.setattr(proctree, "_pid_max", lambda: 32_768)
    monkeypatch.setattr(proctree, "_last_pid", lambda: 1500)
    monkeypatch.setattr(proctree, "_forks", lambda: 100_000)
    assert proctree.allocated_since(1000, 100_000 - 25_000) is None  # 3/4 of pid_max
    assert proctree.allocated_since(1000, 100_000 - 1_000) is not None
    assert proctree.allocated_since(1000, None) is None  # unknown at the root's start


def exec_done(token: str, *procs: subprocess.Popen[bytes], timeout: float = 20.0) -> bool:
    """Whether each of ``procs`` is found by ``token`` system-wide within ``timeout``: its
    exec is done (under load that took longer than the scan that followed the start: the
    test failed once so, a process inside exec not seen yet)."""
    want = {p.pid for p in procs}
    return wait_until(lambda: want <= set(carriers(RUN_TOKEN_VAR, token)), timeout)


def test_a_carrier_started_after_the_root_is_found_one_started_before_is_not():
    token = secrets.token_hex(8)
    env = {**BASE_ENV, RUN_TOKEN_VAR: token}
    hold = [sys.executable, "-c", "import time; time.sleep(60)"]
    before = subprocess.Popen(hold, env=env)
    root = subprocess.Popen(hold, env=env)
    try:
        members = ProcessSet.of_popen(root, RUN_TOKEN_VAR, token)
        after = subprocess.Popen(hold, env=env)
        try:
            # the control: the same token, found in the whole system (once each exec is
            # done: inside exec a process's environment reads empty; a set's kill looks
            # again for such a process, a single scan cannot see it yet)
            assert exec_done(token, before, after)
            found = set(members.members())
            assert root.pid in found and after.pid in found
            assert before.pid not in found
        finally:
            after.kill()
            after.wait()
    finally:
        for p in (before, root):
            p.kill()
            p.wait()


def test_a_mark_taken_before_the_fork_dates_the_root_without_reading_its_stat(monkeypatch):
    """A launch takes a :class:`Mark` before forking the root: the set then never reads the
    root's ``/proc`` stat (which waits while the root is in execve), and still tells a
    carrier started before it from the root and one started after."""
    token = secrets.token_hex(8)
    env = {**BASE_ENV, RUN_TOKEN_VAR: token}
    hold = [sys.executable, "-c", "import time; time.sleep(60)"]
    before = subprocess.Popen(hold, env=env)
    root = after = None
    try:
        started = proctree._stat(before.pid)
        assert started is not None
        # start times count clock ticks: the mark must fall in a later one than `before`
        assert wait_until(lambda: proctree.Mark.now().ticks > started.start, 5)
        mark = proctree.Mark.now()
        root = subprocess.Popen(hold, env=env)
        real_stat, read = proctree._stat, []
        monkeypatch.setattr(proctree, "_stat", lambda pid: read.append(pid) or real_stat(pid))
        members = ProcessSet.of_popen(root, RUN_TOKEN_VAR, token, mark)
        assert read == []
        monkeypatch.setattr(proctree, "_stat", real_stat)
        me = real_stat(root.pid)
        assert me is not None and mark.ticks <= me.start
        after = subprocess.Popen(hold, env=env)
        assert exec_done(token, before, after)  # the control (see the test above)
        found = set(members.members())
        assert root.pid in found and after.pid in found
        assert before.pid not in found
    finally:
        for p in (before, root, after):
            if p is not None:
                p.kill()
                p.wait()


@pytest.mark.parametrize("sweep", [proctree.SWEEP_SECONDS, 0.0],
                         ids=["looks-again", "negative-control"])
def test_a_kill_looks_again_for_a_carrier_inside_exec(monkeypatch, sweep):
    """While a process is inside exec its environment and command line read empty, so its
    token cannot be seen: the kill's sweep looks again until it can. The process here
    reads so for the sweep's first two looks. The negative control, a sweep given no time
    to look again, leaves it running."""
    token = secrets.token_hex(8)
    mark = proctree.Mark.now()
    root = subprocess.Popen(["true"])
    root.wait()
    victim = subprocess.Popen(["sleep", "60"], env={**BASE_ENV, RUN_TOKEN_VAR: token},
                              start_new_session=True)  # out of the root's group
    try:
        members = ProcessSet.of_popen(root, RUN_TOKEN_VAR, token, mark)
        real_environ, real_read = proctree._environ, proctree._read
        hiding = {"looks": 2, "now": False}

        def environ(pid: int) -> bytes | None:
            hiding["now"] = pid == victim.pid and hiding["looks"] > 0
            if hiding["now"]:
                hiding["looks"] -= 1
                return b""
            return real_environ(pid)

        def read(path: str, size: int) -> bytes | None:
            if path == f"/proc/{victim.pid}/cmdline" and hiding["now"]:
                return b""
            return real_read(path, size)

        monkeypatch.setattr(proctree, "_environ", environ)
        monkeypatch.setattr(proctree, "_read", read)
        assert members.kill(sweep=sweep) is True
        if sweep:
            assert hiding["looks"] == 0 and victim.wait(10) == -signal.SIGKILL
        else:
            assert members.hidden == 1 and victim.poll() is None  # escaped
    finally:
        victim.kill()
        victim.wait()
