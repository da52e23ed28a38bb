"""The two moments a command's token is out of ``/proc``'s sight, when the host dies.

1. Between the host's fork and the shell's exec the child has the host's environment, so
   the guard's sweep cannot see it. The shell checks at start that the host is still
   there. The test makes that window as wide as it gets: the host's fork waits, before
   its exec, until the host and then the guard are gone.
2. While a process is inside exec its ``environ`` and ``cmdline`` read empty. The guard
   looks again until it shows. The test serves the guard a fake ``/proc`` whose
   ``environ`` is a FIFO: empty on the first read, the token on the second, so the order
   is fixed without a sleep.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from execengine.proctree import TERM_TOKEN_VAR
from execengine.terminal.guard import guard_argv
from tests.terminal.conftest import procs_with

#: a host with a guarded backend; its fork stands for a command caught between fork and
#: exec (what ``subprocess`` does: close all but what it passes on, then exec) and execs
#: the shell only once the host and the guard are gone
HOST = """
import os, sys, time
from execengine.childenv import build_child_env
from execengine.proctree import TERM_TOKEN_VAR
from execengine.terminal.local import LocalBackend
from execengine.terminal.procs import shell_script

marker, path, check = sys.argv[1], sys.argv[2], sys.argv[3] == "check"
env = build_child_env(os.environ)
backend = LocalBackend(kill_grace=0.3)
backend.run("true", cwd="/", env=env, timeout=30, max_output_chars=100)  # starts the guard
token = "t" + marker
backend.guard.register(token)
alive, host, guard = backend.guard.liveness_fd, os.getpid(), backend.guard.pid

def gone(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rpartition(b")")[2].split()[0] in (b"Z", b"X")
    except OSError:
        return True

pid = os.fork()
if pid == 0:
    os.closerange(3, alive)
    os.closerange(alive + 1, 1 << 16)
    os.set_inheritable(alive, True)
    while os.getppid() == host or not gone(guard):
        time.sleep(0.005)
    command = f"touch {path}; exec sleep 3{marker}"
    script = shell_script(command, 1, alive if check else None)
    os.execve("/bin/bash", ["bash", "--noprofile", "--norc", "-c", script],
              {**env, TERM_TOKEN_VAR: token})
print(pid, guard, flush=True)
time.sleep(600)
"""


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rpartition(b")")[2].split()[0] in (b"Z", b"X")
    except OSError:
        return True


def _wait(predicate, what: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def _host_dies_before_the_shell_execs(tmp_path, check: bool) -> tuple[int, str]:
    marker = str(uuid.uuid4().int)[:12]
    path = tmp_path / "ran"
    host = subprocess.Popen([sys.executable, "-c", HOST, marker, str(path),
                             "check" if check else "nocheck"],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        child, guard = map(int, host.stdout.readline().split())
        host.kill()
        host.wait(10)
        _wait(lambda: _gone(guard), "the guard finished its sweep")
        return child, marker
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        host.stdout.close()


def test_a_shell_that_starts_after_the_host_died_runs_nothing(tmp_path) -> None:
    child, marker = _host_dies_before_the_shell_execs(tmp_path, check=True)
    try:
        _wait(lambda: _gone(child), "the shell exited on its own")
        assert not (tmp_path / "ran").exists()
        assert procs_with(marker) == []
    finally:
        for pid in procs_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_negative_control_without_the_check_the_shell_runs_unguarded(tmp_path) -> None:
    _, marker = _host_dies_before_the_shell_execs(tmp_path, check=False)
    try:
        _wait(lambda: (tmp_path / "ran").exists() and procs_with(f"3{marker}") != [],
              "the unchecked shell ran its command")
    finally:
        for pid in procs_with(marker):
            os.kill(pid, signal.SIGKILL)


def _fake_proc(root, pid: int, cmdline: bytes) -> str:
    entry = root / str(pid)
    entry.mkdir(parents=True)
    # state R, flags without PF_KTHREAD
    (entry / "stat").write_bytes(f"{pid} (sleep) R 1 {pid} {pid} 0 -1 4194560 0".encode())
    (entry / "cmdline").write_bytes(cmdline)
    os.mkfifo(entry / "environ")
    return str(entry / "environ")


def _serve(fifo: str, answers: list[bytes]) -> threading.Thread:
    """Each read of ``fifo`` by the guard gets the next answer: each answer waits until
    the reader before it has closed the FIFO (a writer that came while it still read
    would add to what it reads)."""

    def no_reader() -> bool:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return True  # ENXIO: nobody has it open for reading
        os.close(fd)  # a reader still there (or a new one: it reads nothing, as if hidden)
        return False

    def serve() -> None:
        for i, answer in enumerate(answers):
            while i and not no_reader():
                time.sleep(0.001)
            with open(fifo, "wb") as fh:  # returns once the guard opened it
                fh.write(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def _guard(root, token: str) -> subprocess.Popen[bytes]:
    argv = guard_argv(str(root))
    argv[-2] = "3600"  # how long it may look for a hidden process: longer than the test
    guard = subprocess.Popen(argv, stdin=subprocess.PIPE)
    assert guard.stdin is not None
    guard.stdin.write(f"+{token}\n".encode())
    guard.stdin.close()  # EOF: the host is gone, the sweep starts
    return guard


def test_the_sweep_looks_again_while_a_process_is_inside_exec(tmp_path) -> None:
    victim = subprocess.Popen(["sleep", "60"])
    try:
        token = uuid.uuid4().hex
        fifo = _fake_proc(tmp_path / "proc", victim.pid, b"")
        server = _serve(fifo, [b"", f"A=1\0{TERM_TOKEN_VAR}={token}\0".encode()])
        guard = _guard(tmp_path / "proc", token)
        assert victim.wait(30) == -signal.SIGKILL
        assert guard.wait(30) == 0
        server.join(5)
        assert not server.is_alive()  # the guard read the token
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.parametrize("cmdline", [b"env\0-i\0sleep\0", b"\0"])
def test_a_process_with_an_empty_environment_is_not_waited_for(tmp_path, cmdline) -> None:
    # an empty environment beside a command line is a process started with none (env -i),
    # not one inside exec: the sweep ends at once (else it would look for an hour)
    victim = subprocess.Popen(["sleep", "60"])
    try:
        fifo = _fake_proc(tmp_path / "proc", victim.pid, cmdline)
        server = _serve(fifo, [b""])
        guard = _guard(tmp_path / "proc", uuid.uuid4().hex)
        assert guard.wait(30) == 0
        assert victim.poll() is None  # not ours: untouched
        server.join(5)
        assert not server.is_alive()
    finally:
        victim.kill()
        victim.wait()
