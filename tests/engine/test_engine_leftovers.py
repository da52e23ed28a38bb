"""What a SIGKILLed host leaves behind is removed by the next engine; spill files are bounded."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from execengine.config import Config
from execengine.engine import Engine, spill
from execengine.engine.spill import prune, spill_dir
from execengine.hostdirs import make_dir, owner_alive, owner_tag, parse_owner, start_time, sweep
from execengine.launch.local import LocalLauncher
from execengine.registry import ToolRegistry

HOST = textwrap.dedent("""
    import sys
    from execengine.config import Config
    from execengine.engine import Engine
    from execengine.registry import ToolRegistry
    cfg = Config().with_overrides({"code_execution.mode": "strict",
                                   "code_execution.isolation": "none",
                                   "code_execution.max_stdout_bytes": 256})
    with ToolRegistry(cfg) as reg, Engine(config=cfg, registry=reg) as e:
        e.execute("import os, sys, time\\nprint('x' * 1000, flush=True)\\n"
                  "open(%r, 'w').write(str(os.getpid()))\\ntime.sleep(60)")
""")


@pytest.fixture
def tmpdir_root(monkeypatch):
    """A private, short temp dir for this test and for every process it starts."""
    root = tempfile.mkdtemp(prefix="ee-", dir="/tmp")
    monkeypatch.setenv("TMPDIR", root)
    monkeypatch.setattr(tempfile, "tempdir", root)
    # the engine's own spill folder (the suite points it elsewhere), now under ``root``
    monkeypatch.setattr(spill, "spill_dir", spill_dir)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _wait_gone(pid: int, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} still runs")


def _engine(**over) -> Engine:
    cfg = Config().with_overrides({f"code_execution.{k}": v for k, v in over.items()})
    return Engine(config=cfg, registry=ToolRegistry(cfg), launcher=LocalLauncher())


def test_killed_hosts_directories_are_removed_by_the_next_engine(tmpdir_root):
    pidfile = Path(tmpdir_root) / "pid"
    host = subprocess.Popen([sys.executable, "-c", HOST % str(pidfile)])
    try:
        deadline = time.monotonic() + 20
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            time.sleep(0.02)
        child = psutil.Process(int(pidfile.read_text()))
        env = child.environ()
        staging = os.path.dirname(child.cmdline()[-1])
        runtime = env["PYTHONPATH"].split(os.pathsep)[1]
        sockets = os.path.dirname(env["EXECENGINE_RPC_ENDPOINT"])
        spill = [e.path for e in os.scandir(spill_dir())]
        host.send_signal(signal.SIGKILL)
        host.wait(5)
        _wait_gone(child.pid)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(5)
    left = [staging, runtime, sockets]
    for path in left:
        assert os.path.isdir(path), path  # nobody cleaned up: the host was killed
        assert f"-{host.pid}-" in os.path.basename(path)  # the owner's pid is in the name
        assert os.path.dirname(path) == tmpdir_root
    assert len(spill) == 1  # the truncated stdout of the running script

    live = make_dir("execengine-run-", tmpdir_root)  # this process's: must stay
    foreign = os.path.join(tmpdir_root, "execengine-run-untagged")
    os.mkdir(foreign)
    with _engine():
        pass
    assert [p for p in left if os.path.exists(p)] == []
    assert os.path.isdir(live) and os.path.isdir(foreign)
    assert os.path.exists(spill[0])  # fresh: kept, the result of that run may point at it
    with _engine(spill_max_age_hours=0):
        pass
    assert not os.path.exists(spill[0])


def test_a_live_engines_directories_survive_another_engines_start(tmpdir_root):
    with _engine(mode="strict") as first:
        seen = []
        first.launcher = _Spy(first.launcher, seen, lambda: _engine().close())
        r = first.execute("print('ok')")
    assert r.output == "ok\n" and seen == [True, True, True]


class _Spy(LocalLauncher):
    """At launch: start (and close) a second engine, then check the first's dirs exist."""

    def __init__(self, inner, seen, other) -> None:
        self.inner, self.seen, self.other = inner, seen, other

    def launch(self, spec):
        self.other()
        runtime = spec.readable_paths[1]
        self.seen += [os.path.isdir(p) for p in (spec.cwd, runtime, spec.socket_dir)]
        return self.inner.launch(spec)

    def close(self) -> None:
        self.inner.close()


def test_owner_tags_and_pid_reuse(tmpdir_root):
    me, start = os.getpid(), start_time(os.getpid())
    assert start is not None and owner_tag() == f"{me}-{start}"
    assert owner_alive(me, start)
    assert not owner_alive(me, start + 1)  # same pid, another process: reused
    assert parse_owner(f"execengine-rpc-{me}-{start}-abc", "execengine-rpc-") == (me, start)
    assert parse_owner("execengine-rpc-abc", "execengine-rpc-") is None
    reused = os.path.join(tmpdir_root, f"execengine-rpc-{me}-{start + 1}-x")
    mine = make_dir("execengine-rpc-", tmpdir_root)
    link = os.path.join(tmpdir_root, f"execengine-run-{me}-{start + 1}-link")
    target = make_dir("keep-", tmpdir_root)
    os.mkdir(reused)
    os.symlink(target, link)
    assert os.stat(mine).st_mode & 0o777 == 0o700
    assert sweep(["execengine-rpc-", "execengine-run-"], [tmpdir_root]) == [reused]
    assert os.path.isdir(mine) and os.path.islink(link) and os.path.isdir(target)


def test_prune_spill_files_by_age_then_size(tmp_path):
    now = time.time()
    files = {}
    for i, (age_h, size) in enumerate([(48, 10), (5, 400), (3, 300), (1, 200), (0, 100)]):
        p = tmp_path / f"execengine-stdout-{i}.txt"
        p.write_bytes(b"x" * size)
        os.utime(p, (now - age_h * 3600, now - age_h * 3600))
        files[i] = p
    other = tmp_path / "notes.txt"
    other.write_bytes(b"y" * 10_000)
    os.utime(other, (now - 99 * 3600, now - 99 * 3600))
    removed = prune(str(tmp_path), max_age_seconds=24 * 3600, max_bytes=600, now=now)
    assert removed == [str(files[0]), str(files[1])]  # too old; then oldest until <= 600
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "execengine-stdout-2.txt", "execengine-stdout-3.txt", "execengine-stdout-4.txt",
        "notes.txt"]
    assert prune(str(tmp_path / "missing"), max_age_seconds=0, max_bytes=0) == []
