"""Red team: the host's file tools set a new file's mode and owner by its name.

``write_file`` and ``patch`` run on the host (as root here). They write a temporary file
next to the target, then gave it its mode and owner with ``chmod`` and ``chown`` *by name*
before renaming it over the target. The temporary file lies in a folder the script may
write: a script that swaps it for a symbolic link in that window (a thread listing the
folder while its main thread calls the tool with a large content, whose write and fsync
keep the window open) had the host's ``chmod`` applied to the link's target, a root file
outside every root, which became mode 0777 (the mode of the script's own target file):
``/etc/passwd`` or ``/etc/shadow`` world-writable, from ``isolated``. Now the mode and owner
are set on the descriptor of the file the tool made.

In a root-owned working directory (the script acts there as root, so it may remove the
tool's root-owned temporary file). In a user's folder the kernel refuses the swap anyway
(an id-mapped bind does not let the script remove a file of an unmapped owner, root's).

Two controls: the probe *wins the race* (the link it swapped in ends up as the target, so
the swap did land between the temporary file's creation and its rename) at every level;
and at level ``none`` (the script is the engine's uid) the script's own ``chmod`` of the
victim does change it, so the host-side check sees a change when there is one.
"""

from __future__ import annotations

import json
import os
import stat

import pytest

from execengine.config import Config
from execengine.engine.core import Engine

from .conftest import level_params

LEVEL = level_params()

SWAP = r"""
import json, os, threading, time
from hermes_tools import patch, write_file
VICTIM, TOOL = {victim!r}, {tool!r}
stop = False

def swapper():
    # replace each temporary file the tool makes for "t" with a link to the victim
    while not stop:
        for name in os.listdir("."):
            if name.startswith(".t.") and name.endswith(".tmp") and not os.path.islink(name):
                try:
                    os.unlink(name)
                    os.symlink(VICTIM, name)
                except OSError:
                    pass

def reset():
    if os.path.lexists("t"):
        os.unlink("t")
    with open("t", "w") as fh:
        fh.write("x\n")
    os.chmod("t", 0o777)  # the mode the tool gives what replaces "t"

big = "A" * (4 << 20)
reset()
thread = threading.Thread(target=swapper)
thread.start()
wins = calls = 0
deadline = time.monotonic() + 40
while wins < 2 and time.monotonic() < deadline:
    calls += 1
    if TOOL == "write_file":
        write_file("t", big)
    else:
        patch(mode="patch", patch="*** Begin Patch\n*** Update File: t\n@@\n-x\n+" + big
              + "\n*** End Patch\n")
    if os.path.islink("t"):  # the link swapped in was renamed over "t": the race was won
        wins += 1
    reset()
stop = True
thread.join()
try:
    os.chmod(VICTIM, 0o777)
    direct = "done"
except OSError as exc:
    direct = type(exc).__name__
print(json.dumps({{"wins": wins, "calls": calls, "direct": direct}}))
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("tool", ["write_file", "patch"])
@pytest.mark.parametrize("level", LEVEL)
def test_a_swapped_temporary_file_does_not_redirect_the_hosts_chmod(level, tool, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    victim = tmp_path / "victim"  # a root file outside every root of the execution
    victim.write_text("root's\n")
    victim.chmod(0o600)
    config = Config().with_overrides({
        "code_execution.isolation": level, "code_execution.min_isolation": level,
        "code_execution.mode": "project", "code_execution.timeout": 80,
        "approvals.execute_code": "allow"})
    with Engine(config) as engine:
        r = engine.execute(SWAP.format(victim=str(victim), tool=tool), cwd=str(project))
    assert r.status == "success", (r.error, r.stderr[-2000:])
    found = json.loads(r.output.strip().splitlines()[-1])
    st = os.stat(victim)
    if level == "none":
        # the control: nothing confines the script, its own chmod reaches the victim
        assert found["direct"] == "done" and stat.S_IMODE(st.st_mode) == 0o777, found
        return
    assert found["direct"] != "done", found
    # the control: the swap did land inside the tool's window, at least twice
    assert found["wins"] >= 2, found
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == 0, (oct(st.st_mode), found)
