"""Harness of the adversarial suite: one launcher per level for the whole session, and
``run_attack`` to start an attack script from ``attacks/`` at a level.

Each attack prints one JSON line describing what it managed to do; tests also check the
host side (a datagram that arrived, a file that exists, a process still alive). Level
``none`` is the negative control: there the probe must *detect* the leak.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import secrets
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from execengine.childenv import build_child_env
from execengine.config import Config
from execengine.isolation.detect import detect
from execengine.launch.base import Child, Launcher, LaunchLimits, LaunchSpec
from tests.isolation._prestart import teach
from tests.rpc.conftest import rpc  # noqa: F401  (the RPC tests' fixture, for the red team's)

ATTACKS = Path(__file__).resolve().parent / "attacks"
LEVELS = ("none", "restricted", "isolated")
SECRET_NAME = "EXECENGINE_TEST_HOST_SECRET"


class Level(str):
    """A level of the suite. ``prestarted``: the attack runs the way the engine runs a
    script, ``python -c CODE ARGS`` in an interpreter a warm entry started ahead, under
    its uid and filters, that applies the rest when the plan comes (``sandbox/zygote.py``);
    otherwise the entry applies everything and then execs the attack."""

    prestarted = False


def level_params(*, prestarted: bool = False) -> list[Any]:
    """Each level; with ``prestarted``, ``isolated`` a second time, through a pre-started
    interpreter (the only level that starts one)."""
    report = detect()
    out = []
    for lv in LEVELS:
        skip = pytest.mark.skipif(not report.levels.get(lv),
                                  reason=f"level {lv} unavailable: {report.reasons.get(lv)}")
        out.append(pytest.param(Level(lv), marks=skip, id=lv))
        if prestarted and lv == "isolated":
            pre = Level(lv)
            pre.prestarted = True
            out.append(pytest.param(pre, marks=skip, id=f"{lv}-prestarted"))
    return out


def binds(level: str) -> bool:
    """Whether ``level`` puts read-only binds over the protected paths (and masks the denied
    ones in the working directory): ``isolated``, and ``restricted`` where its entry gets a
    mount namespace of its own (as root)."""
    return level == "isolated" or (level == "restricted" and os.geteuid() == 0
                                   and detect().has("namespaces"))


def level_engine(level: str, **overrides: Any) -> Any:
    """An engine pinned to ``level`` (no fallback to a weaker one), 30 s a script, with
    ``overrides`` (dotted config keys)."""
    from execengine.engine.core import Engine

    return Engine(Config().with_overrides({
        "code_execution.isolation": level, "code_execution.min_isolation": level,
        "code_execution.timeout": 30, **overrides}))


#: the start of a probe script: ``attempt(name, fn)`` records in ``res`` whether ``fn()``
#: was done or which ``OSError`` refused it
ATTEMPT = r"""
import json, os
res = {}
def attempt(name, fn):
    try:
        fn()
        res[name] = "done"
    except OSError as e:
        res[name] = type(e).__name__
"""

#: runs an attack from ``python -c``: argv[1] is the attack, the rest its arguments
RUN_PATH = ("import runpy, sys; sys.argv[:] = sys.argv[1:]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")


@pytest.fixture(scope="session")
def launchers():
    from execengine.launch.local import LocalLauncher

    made: dict[tuple[str, bool], Launcher] = {}

    def get(level: str) -> Launcher:
        key = (str(level), getattr(level, "prestarted", False))
        if key not in made:
            if level == "none":
                made[key] = LocalLauncher()
            elif level == "restricted":
                from execengine.launch.sandboxed import RestrictedLauncher

                made[key] = RestrictedLauncher()
            else:
                from execengine.launch.sandboxed import IsolatedLauncher

                made[key] = IsolatedLauncher()
        return made[key]

    yield get
    for launcher in made.values():
        pool = getattr(launcher, "_pool", None)
        entries = list(pool._entries) if pool is not None else []
        warm_dirs = [d for e in entries if e.resources[1] for d in e.resources[1].dirs]
        spawner_pid = getattr(getattr(launcher, "spawner", None), "pid", None)
        launcher.close()
        check_launcher_closed(launcher, spawner_pid, warm_dirs)


def check_launcher_closed(launcher: Launcher, spawner_pid: int | None,
                          warm_dirs: list[str]) -> None:
    """After close: no spawner, no warm entry's cgroup, no grant held by the launcher."""
    if spawner_pid is not None:
        assert wait_until(lambda: not os.path.exists(f"/proc/{spawner_pid}")
                          or _zombie(spawner_pid), 3.0), f"spawner {spawner_pid} survives"
    assert not [d for d in warm_dirs if os.path.exists(d)], warm_dirs
    grants = getattr(launcher, "_grants", None)
    if grants is not None:
        assert not grants._count, grants._count


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.fixture(autouse=True)
def host_secret(monkeypatch):
    value = "hostsecret-" + secrets.token_hex(8)
    monkeypatch.setenv(SECRET_NAME, value)
    return value


@dataclass
class Outcome:
    returncode: int | None
    stdout: str
    stderr: str
    token: str

    @property
    def result(self) -> dict[str, Any]:
        for line in reversed(self.stdout.splitlines()):
            if line.startswith("{"):
                return json.loads(line)
        raise AssertionError(f"attack printed no result; rc={self.returncode}\n"
                             f"stdout={self.stdout[-2000:]}\nstderr={self.stderr[-2000:]}")


@pytest.fixture
def workdir(tmp_path):
    d = tmp_path / "work"
    d.mkdir()
    return d


@pytest.fixture
def run_attack(launchers, workdir):
    children: list[Child] = []
    tokens: list[str] = []

    def start(level: str, name: str, args: dict[str, Any] | None = None,
              limits: LaunchLimits | None = None) -> tuple[Child, str]:
        token = secrets.token_hex(16)
        # the test's own temp dir: at level none a tmp bomb must not fill the host's /tmp
        # (the sandbox levels replace TMPDIR with their private tmp)
        tmp = workdir.parent / "tmp"
        tmp.mkdir(exist_ok=True)
        env = build_child_env(os.environ, extra={"EXECENGINE_RUN_TOKEN": token,
                                                 "TMPDIR": str(tmp)})
        attack = [str(ATTACKS / f"{name}.py"), json.dumps(args or {})]
        prestarted = getattr(level, "prestarted", False)
        spec = LaunchSpec(
            argv=[sys.executable, "-c", RUN_PATH, *attack] if prestarted
            else [sys.executable, "-I", *attack],
            env=env, cwd=str(workdir), run_token=token, writable_paths=(str(workdir),),
            readable_paths=(str(ATTACKS),), limits=limits or LaunchLimits(),
            prestart=prestarted)
        launcher = launchers(level)
        # specs like this one (same limits) teach the launcher what to start ahead
        entry = teach(launcher, spec) if prestarted else None
        child = launcher.launch(spec)
        # the attack runs in the pre-started interpreter, not in a cold entry
        assert entry is None or child.pid == entry, (child.pid, entry)
        children.append(child)
        tokens.append(token)
        return child, token

    def run(level: str, name: str, args: dict[str, Any] | None = None,
            limits: LaunchLimits | None = None, timeout: float = 20.0) -> Outcome:
        child, token = start(level, name, args, limits)
        rc = child.wait(timeout)
        if rc is None:
            child.kill()
            rc = child.wait(5)
        out, err = child.stdout.read(), child.stderr.read()
        child.close()
        return Outcome(rc, out.decode(errors="replace"), err.decode(errors="replace"), token)

    run.start = start  # type: ignore[attr-defined]
    yield run
    for child in children:
        child.close()
    check_no_leaks(children, tokens)


def wait_until(pred, timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return bool(pred())



def _uid_processes(uids: set[int]) -> list[int]:
    """Live (non-zombie) processes whose real uid is in ``uids``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as fh:
                fields = dict(line.split(":\t", 1) for line in fh.read().splitlines()
                              if ":\t" in line)
        except OSError:
            continue
        if int(fields.get("Uid", "-1").split()[0]) in uids and not fields.get(
                "State", "").startswith("Z"):
            found.append(int(name))
    return found


def _cgroups_of(tokens: list[str]) -> list[str]:
    from execengine.isolation import cgroups

    try:
        layout = cgroups.discover()
    except OSError:
        return []
    parents = [p for p in (layout.v2_parent, *(d for _, d in layout.v1_parents)) if p]
    out = []
    for parent in parents:
        with contextlib.suppress(OSError):
            out += [n for n in os.listdir(parent)
                    if any(n.startswith(cgroups.PREFIX + t[:16]) for t in tokens)]
    return out


def check_no_leaks(children: list[Child], tokens: list[str]) -> None:
    """Nothing of these executions survives: no process with their run token, none of
    their slot uids, no cgroup of theirs."""
    from execengine.proctree import RUN_TOKEN_VAR, carriers

    uids = {c.uid for c in children if getattr(c, "uid", None) is not None}
    assert wait_until(lambda: not any(carriers(RUN_TOKEN_VAR, t) for t in tokens), 3.0)
    if uids:
        assert wait_until(lambda: not _uid_processes(uids), 3.0), _uid_processes(uids)
    assert wait_until(lambda: not _cgroups_of(tokens), 3.0), _cgroups_of(tokens)
    # groups prepared ahead (warm entries) are not named after the token: check each
    dirs = [d for c in children for d in getattr(c, "cgroup_dirs", ())]
    assert wait_until(lambda: not any(os.path.exists(d) for d in dirs), 3.0), dirs


@pytest.fixture
def origin():
    """An HTTP server on 127.0.0.1 (allow-lists name ``localhost``): its port, and the
    paths requested from it."""
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            body = b"<html><title>ok</title><body>REACHED</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], hits
    server.shutdown()
    server.server_close()
    thread.join(5)
