"""execute_code on the ssh backend, against a real sshd on loopback: the script and its
children run as the remote user with an environment built from the allow-list, tool calls
come back to the host through the forwarded socket, and after a timeout, a dropped
connection or the end of the script nothing of the execution is left on the remote."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from execengine.config import Config
from execengine.engine import Engine
from execengine.policy import ToolPolicy
from execengine.registry import ToolRegistry
from execengine.remote.launcher import SshLauncher
from execengine.remote.ssh import RemoteError

from .conftest import Remote

HOST_PID = os.getpid()


def _registry(config: Config) -> ToolRegistry:
    reg = ToolRegistry(config)

    def where(args: dict, ctx: object) -> dict:
        return {"host_pid": os.getpid(), "echo": args.get("text")}

    reg.register("where", "probe", {"description": "Where the host runs.", "parameters": {
        "type": "object", "properties": {"text": {"type": "string"}}}}, where,
        policy=ToolPolicy(script_callable=True))
    return reg


@pytest.fixture(scope="module")
def engine(remote: Remote):
    config = Config().with_overrides(remote.overrides(**{
        "code_execution.timeout": 30.0, "code_execution.kill_grace": 1.0}))
    reg = _registry(config)
    with Engine(config, reg) as eng:
        assert isinstance(eng.launcher, SshLauncher)
        yield eng
    reg.close()


def test_script_runs_remotely_as_the_remote_user(engine: Engine, remote: Remote) -> None:
    r = engine.execute("import os, pwd, sys\n"
                       "print(pwd.getpwuid(os.getuid()).pw_name, os.getcwd(), sys.version_info[0])",
                       mode="project")
    assert r.status == "success", (r.error, r.stderr)
    user, cwd, major = r.output.split()
    assert (user, major) == (remote.user, "3")
    assert cwd == str(remote.home)
    assert remote.wait_no_processes() == []


def test_tool_calls_come_back_to_the_host(engine: Engine) -> None:
    r = engine.execute("from hermes_tools import where\n"
                       "import json\n"
                       "print(json.dumps([where(text=str(i)) for i in range(50)]))")
    assert r.status == "success", (r.error, r.stderr)
    replies = json.loads(r.output)
    assert [x["echo"] for x in replies] == [str(i) for i in range(50)]
    assert {x["host_pid"] for x in replies} == {HOST_PID}
    assert r.tool_calls_made == 50


def test_host_secrets_and_login_environment_stay_behind(engine: Engine,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_API_KEY", "sk-host-secret-0123456789abcdef")
    monkeypatch.setenv("LANG", "C.UTF-8")
    r = engine.execute("import os, json; print(json.dumps(dict(os.environ)))")
    assert r.status == "success", (r.error, r.stderr)
    env = json.loads(r.output)
    assert "MY_API_KEY" not in env and "sk-host-secret" not in r.output
    assert "SSH_CONNECTION" not in env and "SSH_CLIENT" not in env  # the login env dropped
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert env["LANG"] == "C.UTF-8"
    assert env["EXECENGINE_RPC_ENDPOINT"].endswith(".sock")
    assert "EXECENGINE_WATCHDOG_FD" not in env


def test_timeout_leaves_nothing_on_the_remote(engine: Engine, remote: Remote) -> None:
    code = ("import os, signal, subprocess, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "subprocess.Popen(['sleep', '300'])\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            "        time.sleep(300)\n"
            "    os._exit(0)\n"
            "print('started', flush=True)\n"
            "time.sleep(300)\n")
    t0 = time.monotonic()
    r = engine.execute(code, timeout=2.0)
    assert r.status == "timeout"
    assert "started" in r.output
    assert time.monotonic() - t0 < 2.0 + 1.0 + 8
    assert remote.wait_no_processes() == []
    assert os.listdir(remote.home / ".execengine-remote" / "s") == []


def test_sigterm_comes_first(engine: Engine) -> None:
    code = ("import signal, sys, time\n"
            "def bye(*a):\n    print('got SIGTERM', flush=True); sys.exit(3)\n"
            "signal.signal(signal.SIGTERM, bye)\n"
            "print('waiting', flush=True)\ntime.sleep(60)\n")
    r = engine.execute(code, timeout=1.5)
    assert r.status == "timeout"
    assert "got SIGTERM" in r.output


def test_dropped_connection_kills_the_execution_and_the_next_reconnects(
        engine: Engine, remote: Remote) -> None:
    marker = remote.home / "running"
    result = []
    code = (f"import subprocess, time\nsubprocess.Popen(['sleep', '300'])\n"
            f"open({str(marker)!r}, 'w').close()\ntime.sleep(300)\n")
    t = threading.Thread(target=lambda: result.append(engine.execute(code, timeout=60)))
    t.start()
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert time.monotonic() < deadline, "the remote script never started"
        time.sleep(0.05)
    assert isinstance(engine.launcher, SshLauncher)
    engine.launcher.connection.drop()
    t.join(30)
    assert not t.is_alive()
    assert result[0].status == "error"
    assert remote.wait_no_processes() == []
    marker.unlink()
    again = engine.execute("print('back')")
    assert (again.status, again.output) == ("success", "back\n")


def test_an_unknown_host_key_is_refused(remote: Remote, tmp_path) -> None:
    wrong = tmp_path / "known_hosts"
    other = tmp_path / "other"
    os.system(f"ssh-keygen -q -t ed25519 -N '' -f {other}")
    wrong.write_text(f"[127.0.0.1]:{remote.port} " + " ".join(
        (tmp_path / "other.pub").read_text().split()[:2]) + "\n")
    config = Config().with_overrides(remote.overrides(**{
        "ssh.known_hosts_file": str(wrong)}))
    reg = _registry(config)
    with Engine(config, reg) as eng, pytest.raises(RemoteError, match="host key"):
        eng.execute("print('never')")
    reg.close()
