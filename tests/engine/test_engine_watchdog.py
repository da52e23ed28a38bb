"""The child dies when the host dies (watchdog pipe EOF)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import psutil

HOST = textwrap.dedent("""
    import sys
    from execengine.config import Config
    from execengine.engine import Engine
    from execengine.registry import ToolRegistry
    cfg = Config().with_overrides({"code_execution.mode": "strict",
                                   "code_execution.isolation": "none"})
    with ToolRegistry(cfg) as reg, Engine(config=cfg, registry=reg) as e:
        e.execute("import os, time\\nopen(%r, 'w').write(str(os.getpid()))\\ntime.sleep(60)")
""")


def test_child_dies_with_its_host(tmp_path):
    pidfile = tmp_path / "pid"
    host = subprocess.Popen([sys.executable, "-c", HOST % str(pidfile)])
    leftovers: list[str] = []
    try:
        deadline = time.monotonic() + 20
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            time.sleep(0.02)
        pid = int(pidfile.read_text())
        child = psutil.Process(pid)
        # a killed host cannot clean up: remember its directories to remove them here
        leftovers += [os.path.dirname(child.cmdline()[-1]),
                     os.path.dirname(child.environ()["EXECENGINE_RPC_ENDPOINT"])]
        host.send_signal(signal.SIGKILL)
        host.wait(5)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and psutil.pid_exists(pid) and \
                psutil.Process(pid).status() != "zombie":
            time.sleep(0.02)
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(5)
        for d in leftovers:
            shutil.rmtree(d, ignore_errors=True)
