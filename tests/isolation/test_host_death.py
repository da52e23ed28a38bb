"""A SIGKILLed host: everything of its execution dies within 1 s, and the next engine start
removes what is left (cgroups, ACL grants, private tmp folders, staging/socket dirs).

The script forks a ``setsid`` + double-forked stray and a plain child, both re-exec'd with
a marker in their command line, and then sleeps, or waits in a tool call that the host
never answers (its death then ends the call with an error, and the script with it: the
watchdog thread must not die with the script before it took the strays down). Each level
is run for real; a level this host cannot provide is skipped with the reason
(``execengine doctor``).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from execengine.hostdirs import start_time
from execengine.isolation import acl, cgroups, detect
from execengine.isolation.uids import SANDBOX_GID

from ._leftovers import alive, cgroup_dirs_of, tagged

HOST = textwrap.dedent("""
    import sys, time
    from execengine.config import Config
    from execengine.engine import Engine
    from execengine.registry import ToolRegistry
    from execengine.policy import ToolPolicy
    level, workdir, script = sys.argv[1:4]
    cfg = Config().with_overrides({"code_execution.isolation": level,
                                   "code_execution.timeout": 120})
    schema = {"description": "waits", "parameters": {"type": "object", "properties": {}}}
    with ToolRegistry(cfg) as reg, Engine(config=cfg, registry=reg) as e:
        reg.register("web_search", "web", schema, lambda args, ctx: time.sleep(600),
                     policy=ToolPolicy(script_callable=True))
        e.execute(open(script).read(), cwd=workdir)
""")

SCRIPT = textwrap.dedent("""
    import os, sys, time
    def stray(detach):
        pid = os.fork()
        if pid:
            return pid
        if detach:
            os.setsid()
            if os.fork():
                os._exit(0)
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)",
                                  {marker!r}])
    os.waitpid(stray(True), 0)
    stray(False)
    with open({ready!r} + ".tmp", "w") as fh:
        fh.write("1")
    os.rename({ready!r} + ".tmp", {ready!r})
    {wait}
""")
#: how the script waits for the host's death
WAITS = {"sleeping": "time.sleep(600)",
         "in-a-call": "from hermes_tools import web_search; web_search()"}


def marked(marker: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if marker in (p.info["cmdline"] or []):
            found.append(p)
    return found


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:  # exited meanwhile (a short-lived helper of the spawner)
        return []








def _unsent_cgroup(pid: int) -> str | None:
    """An empty cgroup named as host ``pid``'s, made here (None without cgroup v2)."""
    try:
        parent = cgroups.discover().v2_parent
    except OSError:
        return None
    if not parent:
        return None
    path = os.path.join(parent, f"{cgroups.PREFIX}{pid}-{start_time(pid)}-unsent")
    os.mkdir(path)
    return path


@pytest.fixture
def private_tmp(monkeypatch):
    root = tempfile.mkdtemp(prefix="ee-hd-", dir="/tmp")
    os.chmod(root, 0o755)
    monkeypatch.setenv("TMPDIR", root)
    monkeypatch.setattr(tempfile, "tempdir", root)
    yield root
    shutil.rmtree(root, ignore_errors=True)


LEVELS = ["none", "restricted", "isolated"]


@pytest.mark.parametrize(("also_spawner", "wait", "next_at_none"),
                         [(False, "sleeping", False), (False, "in-a-call", False),
                          (True, "sleeping", False), (True, "sleeping", True)],
                         ids=["host", "host-during-a-call", "host+spawner",
                              "host+spawner-then-none"])
@pytest.mark.parametrize("level", LEVELS)
def test_sigkilled_host_leaves_nothing(level, also_spawner, wait, next_at_none, private_tmp):
    """``next_at_none``: the next engine to start runs at level ``none`` (it cleans up as
    well as one at the dead host's level)."""
    report = detect()
    if not report.levels.get(level):
        pytest.skip(f"level {level} not available: {report.reasons.get(level)}")
    if level == "none" and also_spawner:
        pytest.skip("level none has no spawner")
    marker = f"execengine-test-{secrets.token_hex(6)}"
    workdir = Path(private_tmp) / "work"
    workdir.mkdir(mode=0o755)
    ready = workdir / "ready"
    script = Path(private_tmp) / "script.py"
    script.write_text(SCRIPT.format(marker=marker, ready=str(ready), wait=WAITS[wait]))
    host = subprocess.Popen([sys.executable, "-c", HOST, level, str(workdir), str(script)])
    strays: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert host.poll() is None, "the host exited early"
            assert time.monotonic() < deadline, "the script never got ready"
            time.sleep(0.02)
        # the detached stray's exec may still be under way when the script says ready
        # (its waitpid returns once the middle process has forked it and exited)
        while len(strays := marked(marker)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        family = psutil.Process(host.pid).children(recursive=True)
        assert len(strays) == 2
        # the spawner is the host's own child (its forks, the sandbox entries, share its
        # command line but are the execution's)
        spawners = [p for p in psutil.Process(host.pid).children()
                    if "execengine.isolation._spawnserver" in " ".join(_cmdline(p))]
        if also_spawner:
            for p in spawners:
                p.kill()
        # a cgroup the host made and had not told its spawner of yet (a warm entry's, a
        # refill cut short by the death): the spawner removes its dead host's all the same
        unsent = _unsent_cgroup(host.pid) if level != "none" else None
        host.kill()
        killed_at = time.monotonic()
        host.wait(5)
        victims = [p for p in family if p not in spawners] + strays
        if not also_spawner:
            # one observation decides (a second look at a process that is being torn down
            # can still find it, in a state psutil reports as running)
            left = alive(victims)
            while left and time.monotonic() - killed_at < 5:
                time.sleep(0.01)
                left = alive(victims)
            took = time.monotonic() - killed_at
            print(f"\n{level}: everything of the execution gone {took * 1000:.0f} ms after "
                  "the host was SIGKILLed")
            # how fast is a figure (README, reliability), not asserted: under load (another
            # suite on the 2 cores) the watchdog's /proc sweeps at none took over 1 s
            assert left == [], f"still running {took:.2f} s after the host died: {left}"
            if level != "none":
                # the spawner removes its dead host's grants and tmp folders itself,
                # before any other engine starts (issue 40: a nested engine's stayed)
                def held() -> list[str]:
                    grant = os.geteuid() == 0 and acl.group_perm(str(workdir),
                                                                 SANDBOX_GID) is not None
                    return (tagged(private_tmp, "execengine-tmp-", host.pid)
                            + cgroup_dirs_of(host.pid) + (["acl grant"] if grant else []))

                while held() and time.monotonic() - killed_at < 10:
                    time.sleep(0.02)
                assert held() == [], "the spawner left its dead host's resources"
        # the next engine start removes what the dead host left
        from execengine.config import Config
        from execengine.engine import Engine
        from execengine.registry import ToolRegistry

        cfg = Config().with_overrides(
            {"code_execution.isolation": "none" if next_at_none else level})
        with ToolRegistry(cfg) as reg, Engine(config=cfg, registry=reg) as engine:
            engine.execute("pass")  # the launcher starts with the first execution
        deadline = time.monotonic() + 3
        while alive(victims) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert alive(victims) == [], [(p.pid, _cmdline(p)) for p in alive(victims)]
        assert unsent is None or not os.path.exists(unsent)
        assert cgroup_dirs_of(host.pid) == [], [
            (d, Path(d, "cgroup.procs").read_text()) for d in cgroup_dirs_of(host.pid)]
        left = [d for prefix in ("execengine-tmp-", "execengine-run-", "execengine-rpc-",
                                 "execengine-runtime-")
                for d in tagged(private_tmp, prefix, host.pid)]
        assert left == []
        if os.geteuid() == 0 and level != "none":
            assert acl.group_perm(str(workdir), SANDBOX_GID) is None
            assert acl.read(str(workdir), acl.DEFAULT) == [] or all(
                not (tag == acl.GROUP and ident == SANDBOX_GID)
                for tag, _, ident in acl.read(str(workdir), acl.DEFAULT))
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(5)
        for p in alive(strays):
            p.kill()
