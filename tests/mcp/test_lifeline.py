"""The parent-death signal line of :mod:`execengine.mcp.lifeline`, on its own (no guard),
with negative controls."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from mcp.client.stdio import StdioServerParameters

from execengine.mcp import lifeline

REPO = Path(__file__).resolve().parents[2]

HOST = textwrap.dedent("""
    import subprocess, sys, time
    from mcp.client.stdio import StdioServerParameters
    from execengine.mcp import lifeline
    params = StdioServerParameters(command=sys.executable,
                                   args=["-c", "import time; time.sleep(600)"])
    if sys.argv[1] == "tied":
        params = lifeline.tie(params, None, {"PATH": ""})
    # as the SDK starts a server: a session of its own
    child = subprocess.Popen([params.command, *params.args], start_new_session=True)
    print(child.pid, flush=True)
    time.sleep(600)
""")


def _gone_within(pid: int, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.01)
    return False


@pytest.mark.parametrize("how", ["tied", "plain"])
def test_the_parent_death_signal_alone_ends_a_server_with_its_host(how):
    """``plain`` is the negative control: started the same way without the shim, the
    server outlives its SIGKILLed host."""
    host = subprocess.Popen([sys.executable, "-c", HOST, how], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert host.stdout is not None
    server = int(host.stdout.readline())
    try:
        time.sleep(0.3)  # the shim has exec'd the server by now (its check is long done)
        assert not _gone_within(server, 0.1)
        host.kill()
        host.wait(5)
        if how == "tied":
            assert _gone_within(server, 10.0)
        else:  # still there a second after its host's death
            assert not _gone_within(server, 1.0)
    finally:
        host.kill()
        host.wait(5)
        host.stdout.close()
        if how == "plain":
            psutil.Process(server).kill()


def test_a_shim_whose_host_is_already_gone_runs_nothing(tmp_path):
    """The host died between its fork and the shim's ``prctl``: the shim's parent is not
    the host any more, and it exits instead of starting the server."""
    made = tmp_path / "made"
    run = subprocess.run([sys.executable, "-I", "-S", "-c", lifeline.SHIM, "1",
                          sys.executable, "-c", f"open({str(made)!r}, 'w')"], timeout=30)
    assert run.returncode == 137 and not made.exists()
    run = subprocess.run([sys.executable, "-I", "-S", "-c", lifeline.SHIM, str(os.getpid()),
                          sys.executable, "-c", f"open({str(made)!r}, 'w')"], timeout=30)
    assert run.returncode == 0 and made.exists()  # the positive control


def test_a_missing_command_is_still_command_not_found(tmp_path):
    for command in ("no-such-mcp-server-here", str(tmp_path / "nope"), "./nope"):
        with pytest.raises(FileNotFoundError):
            lifeline.tie(StdioServerParameters(command=command, cwd=str(tmp_path)), None,
                         {"PATH": str(tmp_path)})
    tied = lifeline.tie(StdioServerParameters(command="env", args=["a"]), None,
                        {"PATH": os.environ["PATH"]})
    assert tied.command == sys.executable and tied.args[-2:] == ["env", "a"]
