"""A process the script makes with ``clone(CLONE_PARENT)`` is gone when the execution ends.

At ``isolated`` the interpreter is forked from a template by a keeper outside the pid
namespace, so a ``CLONE_PARENT`` child of the script has that keeper as its parent: the
namespace's init, which kills everything and then reports "empty" (the host's
confirmation that the sandbox uid may be handed out again), cannot ``waitpid`` for it. A
red team made one that closes its standard streams (the host's drain then does not wait
for it) and holds a large heap (its exit takes tens of ms): it was still exiting when the
execution's result came back. Init now also waits until the namespace's ``/proc`` shows
no process but itself that has not exited. The negative control shows the probe sees a
killed process that is still exiting.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from .conftest import level_engine, level_params

ISOLATED = [p for p in level_params() if p.values[0] == "isolated"]
HEAP_MB = 400

#: the child: closes its standard streams (the host's drain then does not wait for it),
#: takes a name, touches a large heap, says so, waits; ``thread``: all that in a thread,
#: while the leader ends alone (a zombie whose process still runs)
HOLD = """
import ctypes, mmap, os, threading, time
os.closerange(0, 1024)
def hold():
    ctypes.CDLL(None).prctl(15, MARK, 0, 0, 0)
    m = mmap.mmap(-1, HEAP_MB << 20)
    for i in range(0, HEAP_MB << 20, 4096):
        m[i] = 1
    open("touched", "w").close()
    while True:
        os.pause()
"""
CHILD = {
    "process": HOLD + "hold()\n",
    "thread": HOLD + """
threading.Thread(target=hold).start()
while not os.path.exists("touched"):
    time.sleep(0.01)
ctypes.CDLL(None).syscall(60, 0)  # exit(2): the leader thread only
""",
}

#: the script. The clone is raw, so none of the interpreter's after-fork repairs run: a
#: lock another thread held at that moment (the GIL, ``threading``'s own) stays held for
#: ever in the child, and should another thread have been waiting for the GIL, the
#: child's first switch waits for ever for that thread to take it. So the script first
#: lets the runtime's hello thread finish (the watchdog, the only other, waits in a read
#: and wants nothing), clones holding the GIL (``PyDLL``), and the child at once starts a
#: fresh interpreter. The wait for the child is bounded, so a child that never got going
#: fails the test with a message, not a timeout.
SCRIPT = """
import ctypes, os, signal, sys, threading, time
for thread in threading.enumerate():
    if thread is not threading.current_thread():
        thread.join(10)
libc = ctypes.PyDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
pid = libc.syscall(56, 0x8000 | int(signal.SIGCHLD), 0, 0, 0, 0)  # clone(CLONE_PARENT)
if pid == 0:
    os.execv(sys.executable, [sys.executable, "-I", "-c", {child!r}])
deadline = time.monotonic() + 20
while not os.path.exists("touched") and time.monotonic() < deadline:
    time.sleep(0.01)
print("made", pid > 0, os.path.exists("touched"))
"""


def _exiting(mark: str) -> list[str]:
    """Threads named ``mark`` that have not exited yet (zombies have)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as fh:
                    comm = fh.read().strip()
                with open(f"/proc/{pid}/task/{tid}/stat", "rb") as fh:
                    state = fh.read().rpartition(b")")[2].split()[0]
            except OSError:
                continue
            if comm == mark and state != b"Z":
                out.append(tid)
    return out


@pytest.mark.parametrize("level", ISOLATED)
@pytest.mark.parametrize("kind", sorted(CHILD))
def test_a_clone_parent_child_is_gone_when_the_result_comes(level, kind, tmp_path):
    work = tmp_path / "work"
    work.mkdir(mode=0o777)
    work.chmod(0o777)
    mark = "eeclone" + os.urandom(3).hex()
    probed = 0
    with level_engine(level, **{"code_execution.timeout": 60,
                                "code_execution.memory_mb": 4 * HEAP_MB}) as engine:
        for _ in range(6):
            (work / "touched").unlink(missing_ok=True)
            child = f"MARK, HEAP_MB = {mark.encode()!r}, {HEAP_MB}\n" + CHILD[kind]
            code = SCRIPT.format(child=child)
            r = engine.execute(code, cwd=str(work))
            left = _exiting(mark)
            assert r.status == "success" and r.output.startswith("made True "), r
            assert left == [], left
            # under heavy load, about 1 in 50 children did not get going within the
            # script's 20 s (cause not found); such an attempt proves nothing either way
            probed += r.output == "made True True\n"
            if probed == 3:
                break
    assert probed == 3, f"only {probed} of 6 attempts got the child going"


def test_negative_control_the_probe_sees_a_killed_process_still_exiting(tmp_path):
    mark = "eeclone" + os.urandom(3).hex()
    code = f"MARK, HEAP_MB = {mark.encode()!r}, {HEAP_MB}\n" + CHILD["process"]
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path)
    try:
        while not (tmp_path / "touched").exists():
            assert proc.poll() is None
            os.sched_yield()
        os.kill(proc.pid, signal.SIGKILL)
        assert _exiting(mark) == [str(proc.pid)]
    finally:
        proc.kill()
        proc.wait()
