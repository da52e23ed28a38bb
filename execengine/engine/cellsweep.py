"""The host's sweep of what a session cell left running in the kernel's sandbox.

A kernel kills its cell's leftover processes itself when the cell ends
(``sandbox/kernel.py``), but that code runs in the sandbox, where the cell can replace it.
So the host does it again from outside, through the kernel's cgroup: every process there
that descends from the kernel (the kernel is a subreaper, so a process that double-forks
or calls ``setsid`` is still one) is stopped, then killed. What is not the kernel's (the
namespace's init, an allow-list proxy bridge) is left alone.

The kernel is found by the pid it reported at start (its own, in its pid namespace): the
last ``NSpid`` field of a cgroup member's ``/proc/<pid>/status``. Without a cgroup (level
``none``, or a non-root host) there is nothing to sweep from outside.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable

from execengine.isolation import cgroups

#: how long the sweep goes on while it still finds descendants (forks racing it)
SWEEP_SECONDS = 1.0


def _status(pid: int) -> tuple[int, int] | None:
    """(parent pid, pid in its own namespace) of host ``pid``; None once it is gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            text = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    ppid = nspid = None
    for line in text.splitlines():
        if line.startswith("PPid:"):
            ppid = int(line.split()[1])
        elif line.startswith("NSpid:"):
            nspid = int(line.split()[-1])
    if ppid is None:
        return None
    return ppid, nspid if nspid is not None else pid


def descendants(cgroup_dirs: Iterable[str], kernel_pid: int) -> list[int]:
    """Host pids of the processes in the cgroup that descend from the kernel (whose pid
    in its namespace is ``kernel_pid``), the kernel itself not included."""
    parents: dict[int, int] = {}
    kernel = None
    for pid in cgroups.members(cgroup_dirs):
        st = _status(pid)
        if st is None:
            continue
        parents[pid] = st[0]
        if st[1] == kernel_pid:
            kernel = pid
    if kernel is None:
        return []
    found: list[int] = []
    for pid in parents:
        up, seen = parents.get(pid), 0
        while up is not None and up != kernel and seen < len(parents):
            up, seen = parents.get(up), seen + 1
        if up == kernel:
            found.append(pid)
    return found


def sweep(cgroup_dirs: Iterable[str], kernel_pid: int | None) -> int:
    """Stop, then kill, every descendant of the kernel in its cgroup, until none is left
    (or :data:`SWEEP_SECONDS` pass); how many were killed."""
    dirs = tuple(cgroup_dirs)
    if not dirs or kernel_pid is None:
        return 0
    killed: set[int] = set()
    deadline = time.monotonic() + SWEEP_SECONDS
    while time.monotonic() < deadline:
        fresh = [pid for pid in descendants(dirs, kernel_pid) if pid not in killed]
        if not fresh:
            break
        for sig in (signal.SIGSTOP, signal.SIGKILL):  # no forking while we kill
            for pid in fresh:
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)
        killed.update(fresh)
    return len(killed)
