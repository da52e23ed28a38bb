from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid

import pytest

from execengine.errors import TerminalError
from execengine.terminal.backend import INTERRUPTED_EXIT_CODE, TIMEOUT_EXIT_CODE
from execengine.terminal.local import LocalBackend
from tests.terminal.conftest import procs_with


def run(backend: LocalBackend, command: str, env: dict[str, str], cwd: str = "/",
        timeout: float = 10, limit: int = 10_000, pty: bool = False):
    return backend.run(command, cwd=cwd, env=env, timeout=timeout, max_output_chars=limit,
                       pty=pty)


def test_output_exit_code_and_stderr_merged(backend, env, fd_count) -> None:
    r = run(backend, "echo out; echo err >&2; exit 7", env)
    assert r.output == "out\nerr\n"
    assert r.exit_code == 7
    assert r.duration >= 0 and not r.timed_out


def test_final_cwd_reported_even_after_exit(backend, env, tmp_path) -> None:
    (tmp_path / "sub").mkdir()
    r = run(backend, "cd sub && exit 3", env, cwd=str(tmp_path))
    assert r.cwd == str(tmp_path / "sub")
    assert r.exit_code == 3


def test_env_is_exactly_the_given_one(backend, env) -> None:
    r = run(backend, "echo ${HOME:+home}-${ONLY_HERE:-none}", {**env, "ONLY_HERE": "x"})
    assert r.output.strip() == "home-x"
    r = run(backend, "echo ${HOME:+home}-${ONLY_HERE:-none}", env)
    assert r.output.strip() == "home-none"


def test_non_utf8_output_is_replaced(backend, env) -> None:
    r = run(backend, r"printf 'a\377\376b'", env)
    assert r.output == "a\ufffd\ufffdb"


def test_output_cap_head_and_tail(backend, env) -> None:
    r = run(backend, "seq 1 200000", env, limit=1000)
    assert r.truncated and r.total_chars > 1_000_000
    assert r.output.startswith("1\n2\n3\n")
    assert r.output.endswith("199999\n200000\n")
    assert "... [OUTPUT TRUNCATED - " in r.output and "chars omitted out of" in r.output


def test_timeout_kills_the_whole_tree_including_escapees(backend, env, fd_count) -> None:
    token = uuid.uuid4().hex
    # a child in the group, a setsid'd grandchild and a double-forked one, all ignoring TERM
    command = (f"trap '' TERM; T={token}_a sleep 300 & T={token}_b setsid sleep 300 & "
               f"( ( T={token}_c sleep 300 & ) & ); echo started; wait")
    t0 = time.monotonic()
    r = run(backend, command, env, timeout=0.5)
    assert r.timed_out and r.exit_code == TIMEOUT_EXIT_CODE
    assert "started" in r.output and "timed out after 0.5s" in r.output
    assert time.monotonic() - t0 < 10
    assert procs_with(token) == []


def test_cancel_stops_the_whole_tree_and_says_interrupted(backend, env, tmp_path) -> None:
    token = uuid.uuid4().hex
    cancel = threading.Event()
    started = tmp_path / "started"

    def cancel_once_started() -> None:  # from another thread, as an execution's end does
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        cancel.set()

    setter = threading.Thread(target=cancel_once_started)
    setter.start()
    try:
        r = backend.run(f"trap '' TERM; T={token} setsid sleep 300 & echo started; "
                        f"touch {started}; wait", cwd="/", env=env, timeout=600,
                        max_output_chars=10_000, cancel=cancel)
    finally:
        setter.join()
    assert r.exit_code == INTERRUPTED_EXIT_CODE and not r.timed_out, r
    assert r.output.startswith("started\n") and "interrupted" in r.output, r
    assert r.cwd is None
    assert procs_with(token) == []


def test_grandchild_holding_the_pipe_does_not_delay_the_result(backend, env) -> None:
    token = uuid.uuid4().hex
    r = run(backend, f"(T={token} sleep 30 &) ; echo done", env, timeout=20)
    assert r.output == "done\n" and r.exit_code == 0
    assert r.duration < 5  # not the 30 s the grandchild would hold the pipe
    assert procs_with(token) == []


def test_pty_mode_gives_a_terminal(backend, env) -> None:
    r = run(backend, "test -t 0 && test -t 1 && echo tty; printf 'a\\nb\\n'", env, pty=True)
    assert r.output == "tty\na\nb\n"
    plain = run(backend, "test -t 1 && echo tty || echo notty", env)
    assert plain.output == "notty\n"


def test_missing_cwd_is_an_error(backend, env, tmp_path) -> None:
    with pytest.raises(TerminalError, match="does not exist"):
        run(backend, "true", env, cwd=str(tmp_path / "nope"))


def test_background_start_poll_log_wait(backend, env, fd_count) -> None:
    info = backend.start("for i in 1 2 3; do echo line$i; sleep 0.05; done; exit 4",
                         task="t", cwd="/", env=env)
    assert info.running and info.id
    done = backend.wait(info.id, task="t", timeout=10)
    assert not done.running and done.exit_code == 4
    first = backend.read(info.id, task="t")
    assert first.text == "line1\nline2\nline3\n"
    assert backend.read(info.id, task="t").text == ""  # nothing new
    assert backend.read(info.id, task="t", since=6).text == "line2\nline3\n"
    assert [p.id for p in backend.processes("t")] == [info.id]
    assert backend.processes("other") == []
    with pytest.raises(KeyError):
        backend.poll(info.id, task="other")


def test_background_ring_buffer_is_bounded(backend, env) -> None:
    info = backend.start("seq 1 100000", task="t", cwd="/", env=env)
    backend.wait(info.id, task="t", timeout=10)
    chunk = backend.read(info.id, task="t", since=0)
    assert len(chunk.text) == 4096 and chunk.dropped > 0
    assert chunk.text.endswith("99999\n100000\n")


def test_background_kill_and_close_kill_everything(env) -> None:
    token = uuid.uuid4().hex
    b = LocalBackend(kill_grace=0.2)
    a = b.start(f"T={token}_1 sleep 300", task="t", cwd="/", env=env)
    b.start(f"trap '' TERM; T={token}_2 setsid sleep 300 & T={token}_3 sleep 300", task="t",
            cwd="/", env=env)
    b.start(f"T={token}_4 sleep 300", task="u", cwd="/", env=env, pty=True)
    deadline = time.monotonic() + 5
    while len(procs_with(token)) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    killed = b.kill(a.id, task="t")
    assert not killed.running and killed.exit_code == 128 + 15
    assert not [p for p in procs_with(f"{token}_1")]
    b.close()
    b.close()  # idempotent
    assert procs_with(token) == []
    with pytest.raises(TerminalError, match="closed"):
        b.start("true", task="t", cwd="/", env=env)


def test_background_limit(env) -> None:
    with LocalBackend(max_background=1, kill_grace=0.1) as b:
        b.start("sleep 30", task="t", cwd="/", env=env)
        with pytest.raises(TerminalError, match="limit is 1"):
            b.start("sleep 30", task="t", cwd="/", env=env)


def test_no_bash_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(TerminalError, match="bash is not installed"):
        LocalBackend()


HOST = """
import sys, threading, time
from execengine.childenv import build_child_env
from execengine.terminal.local import LocalBackend
import os
marker = sys.argv[1]
env = build_child_env(os.environ)
backend = LocalBackend(kill_grace=0.3)
backend.start(f"sleep 1{marker}", task="t", cwd="/", env=env)
threading.Thread(target=backend.run, args=(f"setsid sleep 2{marker} & sleep 3{marker}",),
                 kwargs={"cwd": "/", "env": env, "timeout": 600, "max_output_chars": 100},
                 daemon=True).start()
print(backend.guard.pid, flush=True)
time.sleep(600)
"""


def _sleeping(marker: str) -> set[str]:
    """Which of the ``sleep N<marker>`` commands are running."""
    found = set()
    for pid in procs_with(marker):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
            if argv[0].endswith(b"sleep") and argv[1].endswith(marker.encode()):
                found.add(argv[1][:-len(marker)].decode())
    return found


def test_commands_do_not_outlive_a_killed_host(tmp_path) -> None:
    """The host is SIGKILLed while a background command and a foreground one (which left a
    ``setsid`` child) run: its guard stops all of them."""
    import signal
    import subprocess
    import sys

    marker = str(uuid.uuid4().int)[:12]
    host = subprocess.Popen([sys.executable, "-c", HOST, marker], stdout=subprocess.PIPE,
                            text=True)
    try:
        guard = int(host.stdout.readline())
        deadline = time.monotonic() + 10
        while _sleeping(marker) != {"1", "2", "3"} and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _sleeping(marker) == {"1", "2", "3"}  # all three commands run
        host.send_signal(signal.SIGKILL)
        host.wait(5)
        deadline = time.monotonic() + 10
        while procs_with(marker) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert procs_with(marker) == []
        while os.path.exists(f"/proc/{guard}") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not os.path.exists(f"/proc/{guard}")  # the guard is gone too
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        host.stdout.close()
        for pid in procs_with(marker):
            os.kill(pid, 9)


def test_closing_the_backend_stops_its_guard(env) -> None:
    backend = LocalBackend(kill_grace=0.3)
    assert backend.guard.pid is None  # started with the first command
    run(backend, "true", env)
    guard = backend.guard.pid
    assert guard is not None and os.path.exists(f"/proc/{guard}")
    backend.close()
    assert not os.path.exists(f"/proc/{guard}")
