"""A SIGKILLed host takes its MCP stdio servers with it (issue 40: a server in its own
session kept running 757 s after its host died, and a nested ``execengine mcp`` kept its
kernel, cgroups, tmp folders and an ACL grant for minutes).

The host is a real process: it starts the toy server, whose ``stray`` tool leaves a
detached sleeper behind (its own session, reparented away from the server), then blocks
in a call of ``hang``; the test SIGKILLs it then. Everything it started must be gone
within :data:`BOUND` seconds: the server, the stray, and everything else below the host.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from _mcp_helpers import toy_server

from execengine.hostdirs import ENGINE_PREFIXES
from execengine.isolation import acl, detect
from execengine.isolation.uids import SANDBOX_GID
from tests.isolation._leftovers import alive, cgroup_dirs_of, tagged

REPO = Path(__file__).resolve().parents[2]
#: seconds after the host's death by which all it started is gone (measured: well under
#: 0.1 s; generous for a loaded machine)
BOUND = 10.0

HOST = textwrap.dedent("""
    import sys
    from execengine.config import load_config
    from execengine.mcp import attach
    from execengine.registry import ToolRegistry
    config, marker, ready = sys.argv[1:4]
    reg = ToolRegistry.with_builtins(load_config(config), plugins=False)
    attach(reg, cache_dir="")
    print("stray", reg.dispatch("mcp_toy_stray", {"marker": marker}), flush=True)
    open(ready, "w").close()
    reg.dispatch("mcp_toy_hang", {})  # the host is killed during this call
""")








def _marked(marker: str, host: int) -> list[psutil.Process]:
    """The stray: the sleeper whose command line ends with ``marker``."""
    return [p for p in psutil.process_iter(["cmdline"]) if p.pid != host
            and (p.info["cmdline"] or [""])[-1] == marker]


def test_a_killed_host_takes_its_stdio_server_and_its_strays_along(tmp_path):
    marker = f"execengine-test-{secrets.token_hex(6)}"
    ready = tmp_path / "ready"
    config = tmp_path / "config.yaml"
    config.write_text("mcp: {restart_backoff: 0.1}\nmcp_servers:\n" + toy_server("toy"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}
    host = subprocess.Popen([sys.executable, "-c", HOST, str(config), marker, str(ready)],
                            env=env, stdout=subprocess.PIPE, text=True)
    victims: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert host.poll() is None, "the host exited early"
            assert time.monotonic() < deadline, "the host never got ready"
            time.sleep(0.02)
        while len(strays := _marked(marker, host.pid)) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        family = psutil.Process(host.pid).children(recursive=True)
        servers = [p for p in family if any("toy.py" in a for a in p.cmdline())]
        assert servers and len(strays) == 1
        assert os.getsid(strays[0].pid) != os.getsid(servers[0].pid)
        victims = family + strays
        time.sleep(0.2)  # the call of "hang" is under way (it never answers)
        host.kill()
        killed_at = time.monotonic()
        host.wait(5)
        left = alive(victims)
        while left and time.monotonic() - killed_at < BOUND:
            time.sleep(0.01)
            left = alive(victims)
        took = time.monotonic() - killed_at
        print(f"\neverything the host started gone {took * 1000:.0f} ms after its death")
        assert left == [], [(p.pid, p.cmdline()) for p in left]
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(5)
        for p in alive(victims + _marked(marker, host.pid)):
            p.kill()
        if host.stdout is not None:
            host.stdout.close()


NESTED_HOST = textwrap.dedent("""
    import sys
    from execengine.config import load_config
    from execengine.mcp import attach
    from execengine.registry import ToolRegistry
    config, code = sys.argv[1:3]
    reg = ToolRegistry.with_builtins(load_config(config), plugins=False)
    attach(reg, cache_dir="")
    print(reg.dispatch("mcp_nested_execute_code", {"code": code}), flush=True)
""")


@pytest.mark.parametrize("level", ["restricted", "isolated"])
def test_a_killed_host_takes_a_nested_engine_and_all_it_holds_along(tmp_path, level):
    """The nested ``execengine mcp`` runs a sandboxed script that sleeps. After the outer
    host's death: no process of the tree, no cgroup, ACL grant, private tmp, staging,
    runtime or socket folder of the nested engine is left (its spawner removes them once
    the nested engine is gone)."""
    report = detect()
    if not report.levels.get(level):
        pytest.skip(f"level {level} not available: {report.reasons.get(level)}")
    tmp = tmp_path / "tmp"
    work = tmp_path / "work"
    tmp.mkdir()
    work.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(work, 0o755)
    ready = work / "ready"
    nested = tmp_path / "nested.yaml"
    nested.write_text(f"code_execution: {{isolation: {level}, timeout: 600}}\n"
                      "approvals: {execute_code: allow}\n")
    outer = tmp_path / "outer.yaml"
    outer.write_text(
        "mcp: {restart_backoff: 0.1}\nmcp_servers:\n  nested:\n"
        f"    command: {sys.executable}\n"
        f"    args: [-m, execengine, --config, {nested}, mcp]\n"
        f"    cwd: {work}\n    timeout: 600\n"
        f"    env: {{PYTHONPATH: {REPO}, TMPDIR: {tmp}}}\n")
    code = "import time\nopen('ready', 'w').close()\ntime.sleep(600)\n"
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}
    host = subprocess.Popen([sys.executable, "-c", NESTED_HOST, str(outer), code], env=env,
                            stdout=subprocess.DEVNULL)
    victims: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 40
        while not ready.exists():
            assert host.poll() is None, "the host exited early"
            assert time.monotonic() < deadline, "the nested script never got ready"
            time.sleep(0.02)
        victims = psutil.Process(host.pid).children(recursive=True)
        engines = [p for p in victims if "mcp" in p.cmdline() and "--config" in p.cmdline()]
        assert len(engines) == 1
        nested_pid = engines[0].pid

        def held() -> list[str]:
            grant = os.geteuid() == 0 and acl.group_perm(str(work), SANDBOX_GID) is not None
            dirs = [d for prefix in ("execengine-tmp-", *ENGINE_PREFIXES)
                    for d in tagged(str(tmp), prefix, nested_pid)]
            return dirs + cgroup_dirs_of(nested_pid) + (["acl grant"] if grant else [])

        assert held(), "the nested engine holds nothing: the test would prove nothing"
        host.kill()
        killed_at = time.monotonic()
        host.wait(5)
        while (alive(victims) or held()) and time.monotonic() - killed_at < BOUND:
            time.sleep(0.02)
        took = time.monotonic() - killed_at
        print(f"\n{level}: the nested engine and all it held gone {took * 1000:.0f} ms after "
              "the host's death")
        assert alive(victims) == [], [(p.pid, p.cmdline()) for p in alive(victims)]
        assert held() == []
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(5)
        for p in alive(victims):
            p.kill()
