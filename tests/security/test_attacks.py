"""One attack per guarantee, at every level; level ``none`` is the negative control."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys

import pytest

from execengine.launch.base import LaunchLimits
from execengine.proctree import RUN_TOKEN_VAR, carriers

from .conftest import SECRET_NAME, _uid_processes, level_params, wait_until

LEVEL = level_params(prestarted=True)


@pytest.fixture
def host_process(host_secret):
    """A process of the host user whose initial environment holds the secret (monkeypatched
    variables of this very process never reach its /proc/<pid>/environ)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            env={**os.environ, SECRET_NAME: host_secret})
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("level", LEVEL)
def test_host_environment_is_out_of_reach(level, run_attack, host_process):
    found = run_attack(level, "env_secret", {"name": SECRET_NAME,
                                             "host_pid": host_process.pid}).result["found"]
    if level == "none":
        assert "host" in found  # the probe works: the host's environ is readable
    else:
        assert found == []


@pytest.fixture
def listeners():
    tcp = socket.create_server(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    name = "execengine-test-" + secrets.token_hex(6)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0" + name)
    abstract.listen(4)
    for s in (tcp, udp, abstract):
        s.setblocking(False)
    yield tcp, udp, abstract, name
    for s in (tcp, udp, abstract):
        s.close()


def _accepted(listener: socket.socket) -> bool:
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def _datagram(udp: socket.socket, marker: str) -> bool:
    try:
        return udp.recv(256).decode() == marker
    except BlockingIOError:
        return False


@pytest.mark.parametrize("level", LEVEL)
def test_no_network_to_host_listeners(level, run_attack, listeners):
    tcp, udp, abstract, name = listeners
    marker = secrets.token_hex(8)
    res = run_attack(level, "net", {"tcp": tcp.getsockname()[1], "udp": udp.getsockname()[1],
                                    "abstract": name, "marker": marker}).result
    seen = {"tcp": _accepted(tcp), "udp": _datagram(udp, marker), "abstract": _accepted(abstract)}
    if level == "none":
        assert seen == {"tcp": True, "udp": True, "abstract": True}, res
    else:
        assert seen == {"tcp": False, "udp": False, "abstract": False}, res


@pytest.mark.parametrize("level", LEVEL)
def test_no_writes_or_reads_outside_allowed_paths(level, run_attack, tmp_path):
    canary = tmp_path / "canary"
    canary.mkdir()
    canary.chmod(0o777)
    secret_dir = tmp_path / "host"
    secret_dir.mkdir()
    secret_dir.chmod(0o755)
    secret = secret_dir / "secret.txt"
    secret.write_text("host-file-" + secrets.token_hex(6))
    secret.chmod(0o644)
    os.chmod(tmp_path, 0o755)
    res = run_attack(level, "files", {"canary_dir": str(canary),
                                      "secret_file": str(secret)}).result
    assert res["workdir"] == "ok"  # the working directory stays writable
    leaked_write = (canary / "pwned").exists()
    leaked_read = res["read"] == secret.read_text()
    via_write = (canary / "pwned2").exists()
    via_read = res["read_via_proc"] == secret.read_text()
    if level == "none":
        assert leaked_write and leaked_read and via_write and via_read
    else:
        assert not leaked_write, res
        assert not leaked_read, res
        assert not via_write, res
        assert not via_read, res


@pytest.fixture
def victim():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                             "victim-" + secrets.token_hex(4)])
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("level", LEVEL)
def test_host_processes_cannot_be_seen_signalled_or_traced(level, run_attack, victim):
    res = run_attack(level, "procs", {"victim": victim.pid}).result
    alive = victim.poll() is None
    if level == "none":
        assert "victim-" in res["cmdline"] and res["ptrace"] == "attached"
        assert wait_until(lambda: victim.poll() is not None)
    else:
        assert alive, res
        assert "victim-" not in res["cmdline"], res
        assert res["ptrace"] != "attached", res


@pytest.mark.parametrize("level", LEVEL)
def test_no_privilege_gain(level, run_attack):
    res = run_attack(level, "privilege").result
    if level == "none":
        assert res["uid"] == 0 or res["userns"] == "created"
        if os.geteuid() == 0:
            assert res["mount"] == "mounted" and res["su"] == "0"
    else:
        assert res["userns"] == "denied", res
        assert res["mount"] == "denied", res
        assert res["setuid0"] != "uid 0", res
        assert res["su"] != "0", res
        assert res.get("NoNewPrivs") == "1", res
        assert res.get("CapEff", "0" * 16) == "0" * 16, res
        if os.geteuid() == 0:
            assert res["uid"] != 0


BOMB_LIMITS = LaunchLimits(memory_mb=192, cpu_seconds=1, max_processes=24, max_file_mb=8,
                           tmp_mb=16)


@pytest.mark.parametrize("level", LEVEL)
def test_fork_bomb_is_capped(level, run_attack):
    out = run_attack(level, "bombs", {"kind": "fork", "cap": 80}, BOMB_LIMITS)
    forked = out.result["forked"]
    if level == "none" and os.geteuid() == 0:
        assert forked == 80  # root: nothing caps it without a sandbox
    elif level != "none":
        assert forked < BOMB_LIMITS.max_processes, out.result


@pytest.mark.parametrize("level", LEVEL)
def test_memory_bomb_is_stopped(level, run_attack):
    out = run_attack(level, "bombs", {"kind": "memory", "cap": 640}, BOMB_LIMITS)
    last = out.result  # the last progress line survives even a SIGKILL
    if level == "none":
        assert last["mb"] == 640
    else:
        assert last["mb"] <= BOMB_LIMITS.memory_mb, (last, out.returncode)
        assert last.get("error") == "MemoryError" or out.returncode != 0


@pytest.mark.parametrize("level", LEVEL)
def test_cpu_loop_is_stopped(level, run_attack):
    # 2.5 CPU seconds: past the hard limit (cpu_seconds + 1), short enough to finish at none;
    # the wall-clock wait is long enough for those CPU seconds on a heavily shared host
    out = run_attack(level, "bombs", {"kind": "cpu", "cap": 2.5}, BOMB_LIMITS, timeout=45.0)
    if level == "none":
        assert '"survived": true' in out.stdout
    else:
        assert "survived" not in out.stdout
        assert out.returncode in (-signal.SIGXCPU, -signal.SIGKILL), out.returncode


@pytest.mark.parametrize("level", LEVEL)
def test_disk_fill_is_stopped(level, run_attack, workdir):
    out = run_attack(level, "bombs", {"kind": "disk", "cap": 32}, BOMB_LIMITS)
    assert (workdir / "big").exists(), (out.stdout, out.stderr)
    size = (workdir / "big").stat().st_size >> 20
    if level == "none":
        assert size == 32
    else:
        assert size <= BOMB_LIMITS.max_file_mb, out.result


@pytest.mark.parametrize("level", [p for p in LEVEL if p.values[0] != "restricted"])
def test_tmp_fill_is_stopped(level, run_attack):
    # restricted has no mount namespace: its private tmp is limited per file only
    out = run_attack(level, "bombs", {"kind": "tmp", "cap": 48}, BOMB_LIMITS)
    if level == "none":
        assert out.result["mb"] == 48, out.result
    else:
        assert out.result["mb"] <= BOMB_LIMITS.tmp_mb, out.result
        assert out.result["error"], out.result


@pytest.mark.parametrize("level", LEVEL)
def test_no_process_survives_teardown(level, run_attack):
    child, token = run_attack.start(level, "escape")
    line = child.stdout.readline()
    assert b"ready" in line, child.stderr.read()

    def members() -> list[int]:
        if level.prestarted:
            # forked without exec from an interpreter started before the run token was
            # known, the escapees' /proc/<pid>/environ lacks it: found by their uid
            return _uid_processes({child.uid})
        return carriers(RUN_TOKEN_VAR, token)

    assert len(members()) >= 3  # the escapees exist and are found
    child.terminate()
    assert child.wait(0.3) is None  # SIGTERM is ignored by everything
    child.kill()
    child.close()
    assert wait_until(lambda: not members(), timeout=2.0)




@pytest.mark.parametrize("level", [p for p in LEVEL if p.values[0] == "isolated"])
def test_network_can_be_enabled_explicitly(level, run_attack, listeners):
    tcp, udp, _abstract, name = listeners
    marker = secrets.token_hex(8)
    res = run_attack(level, "net", {"tcp": tcp.getsockname()[1], "udp": udp.getsockname()[1],
                                    "abstract": name, "marker": marker},
                     LaunchLimits(network=True)).result
    assert wait_until(lambda: _accepted(tcp), 2.0), res
    assert _datagram(udp, marker), res


@pytest.mark.parametrize("level", LEVEL)
def test_no_setuid_or_setgid_file_can_be_planted(level, run_attack, workdir):
    """Nothing the sandbox writes ends up set-user-ID or set-group-ID on the host (run by
    another user, such a file would run with its owner's ids)."""
    res = run_attack(level, "setuid", {"binary": "/bin/true"}).result
    planted = []
    for name in ("plant", "created", "node"):
        path = workdir / name
        if path.exists() and path.stat().st_mode & 0o6000:
            planted.append((name, oct(path.stat().st_mode)))
    if level == "none":
        assert ("plant", oct((workdir / "plant").stat().st_mode)) in planted, res
        assert res["chmod"] == "done" and res["fchmod"] == "done"
    else:
        assert planted == [], (planted, res)
        for key in ("chmod", "fchmod", "setgid", "create", "mknod"):
            assert res[key].startswith("PermissionError"), res
        assert res.get("coreutils", 1) != 0, res
