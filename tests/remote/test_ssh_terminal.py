"""The terminal tool on the ssh backend, against a real sshd on loopback: commands run as
the remote user in its home, ``cd`` sticks, a timeout kills the whole remote command, and
background processes live on the remote until killed."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest

from execengine.config import Config
from execengine.errors import TerminalError
from execengine.registry import ToolRegistry
from execengine.remote.terminal import SshBackend

from .conftest import Remote


@pytest.fixture
def reg(remote: Remote) -> Iterator[ToolRegistry]:
    config = Config().with_overrides(remote.overrides(**{
        "terminal.kill_grace": 0.5, "approvals.mode": "allow"}))
    r = ToolRegistry.with_builtins(config)
    yield r
    r.close()
    assert remote.wait_no_processes() == []


def call(reg: ToolRegistry, name: str, **args: object) -> dict:
    return json.loads(reg.dispatch(name, args, task_id="t"))


def test_commands_run_remotely_and_cd_sticks(reg: ToolRegistry, remote: Remote) -> None:
    out = call(reg, "terminal", command="id -un; pwd; echo err >&2; exit 3")
    assert out["output"].splitlines() == [remote.user, str(remote.home), "err"]
    assert out["exit_code"] == 3
    assert out["cwd"] == str(remote.home)
    call(reg, "terminal", command="mkdir -p sub/deeper && cd sub/deeper")
    out = call(reg, "terminal", command="pwd; touch made-here")
    assert out["output"].strip() == f"{remote.home}/sub/deeper"
    assert (remote.home / "sub/deeper/made-here").exists()
    out = call(reg, "terminal", command="pwd", workdir="~")
    assert out["output"].strip() == str(remote.home)


def test_secrets_of_the_host_do_not_reach_the_command(reg: ToolRegistry,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret")
    monkeypatch.setenv("LC_MESSAGES", "C")
    out = call(reg, "terminal", command="env")
    assert "sk-host-secret" not in out["output"]
    assert "LC_MESSAGES=C" in out["output"]


def test_timeout_kills_the_remote_command_and_its_strays(reg: ToolRegistry,
                                                         remote: Remote) -> None:
    t0 = time.monotonic()
    out = call(reg, "terminal", command="echo start; (setsid sleep 300 &); sleep 300",
               timeout=1)
    assert out["timed_out"] is True and out["exit_code"] == 124
    assert out["output"].startswith("start")
    assert time.monotonic() - t0 < 15
    assert remote.wait_no_processes() == []


def test_output_is_capped(remote: Remote) -> None:
    config = Config().with_overrides(remote.overrides(**{
        "terminal.max_output_chars": 2000, "approvals.mode": "allow"}))
    with ToolRegistry.with_builtins(config) as reg:
        out = call(reg, "terminal", command="seq 1 100000")
    assert out["truncated"] is True and out["total_chars"] > 100000
    assert len(out["output"]) < 3000
    assert out["output"].startswith("1\n2\n") and out["output"].rstrip().endswith("100000")


def test_missing_workdir_is_an_error(reg: ToolRegistry) -> None:
    out = call(reg, "terminal", command="true", workdir="/no/such/dir")
    assert "working directory does not exist" in out["error"]


def test_background_process_on_the_remote(reg: ToolRegistry, remote: Remote) -> None:
    started = call(reg, "terminal", command="echo up; sleep 300", background=True)
    sid = started["session_id"]
    assert started["status"] == "running"
    deadline = time.monotonic() + 10
    while "up" not in call(reg, "process", action="log", session_id=sid, offset=0)["output"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    while not any(p.name() == "sleep" for p in remote.processes()):  # it follows the echo
        assert time.monotonic() < deadline
        time.sleep(0.05)
    killed = call(reg, "process", action="kill", session_id=sid)
    assert killed["status"] == "exited"
    assert remote.wait_no_processes() == []
    done = call(reg, "terminal", command="echo fin; exit 4", background=True)
    waited = call(reg, "process", action="wait", session_id=done["session_id"], timeout=10)
    assert waited["status"] == "exited" and waited["exit_code"] == 4
    assert call(reg, "process", action="log", session_id=done["session_id"],
                offset=0)["output"] == "fin\n"


def test_dropped_connection_ends_the_command_and_leaves_nothing(reg: ToolRegistry,
                                                                remote: Remote) -> None:

    call(reg, "terminal", command="true")
    host = reg.services.host
    started = call(reg, "terminal", command="sleep 300", background=True)
    host.connection.drop()
    waited = call(reg, "process", action="wait", session_id=started["session_id"], timeout=20)
    assert waited["status"] == "exited"
    assert remote.wait_no_processes(10) == []
    out = call(reg, "terminal", command="echo again")  # reconnects
    assert out["output"] == "again\n"


def test_pty_commands_get_a_terminal_on_the_remote(reg: ToolRegistry) -> None:
    out = call(reg, "terminal", command="test -t 1 && echo tty; printf 'a\\nb\\n'", pty=True)
    assert out["output"] == "tty\na\nb\n" and out["exit_code"] == 0


def test_the_remote_backend_keeps_its_limit_and_its_tasks_apart(reg: ToolRegistry,
                                                                remote: Remote) -> None:
    host = reg.services.host
    backend = SshBackend(host, kill_grace=0.2, max_background=2)
    cwd, env = host.default_cwd(), {"PATH": "/usr/bin:/bin"}
    try:
        backend.start("sleep 300", task="a", cwd=cwd, env=env)
        kept = backend.start("sleep 300", task="b", cwd=cwd, env=env)
        with pytest.raises(TerminalError, match="limit is 2"):
            backend.start("sleep 300", task="a", cwd=cwd, env=env)
        backend.close_task("a")  # stops a's process only
        assert [p.id for p in backend.processes()] == [kept.id]
        assert backend.poll(kept.id, task="b").running
        backend.start("true", task="a", cwd=cwd, env=env)  # its slot is free again
    finally:
        backend.close()
    with pytest.raises(TerminalError, match="closed"):
        backend.start("true", task="a", cwd=cwd, env=env)
    assert backend.processes() == []
    assert remote.wait_no_processes() == []


def test_concurrent_remote_starts_keep_the_limit(reg: ToolRegistry, remote: Remote) -> None:
    # a remote start opens its channel outside the backend's lock (a round trip): two at
    # once both passed the limit check before either was in the table
    host = reg.services.host
    backend = SshBackend(host, kill_grace=0.2, max_background=1)
    cwd, env = host.default_cwd(), {"PATH": "/usr/bin:/bin"}
    ready = threading.Barrier(4)
    outcomes: list[str] = []

    def start() -> None:
        ready.wait()
        try:
            backend.start("sleep 300", task="t", cwd=cwd, env=env)
            outcomes.append("started")
        except TerminalError as exc:
            outcomes.append(str(exc))

    threads = [threading.Thread(target=start) for _ in range(4)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert outcomes.count("started") == 1, outcomes
        assert all("limit is 1" in o for o in outcomes if o != "started"), outcomes
        assert len(backend.processes()) == 1
    finally:
        backend.close()
    assert remote.wait_no_processes() == []
