"""The host's sweep of what a session cell left running in the kernel's sandbox.

A kernel kills its cell's leftover processes itself when the cell ends
(``sandbox/kernel.py``), but that code runs in the sandbox, where the cell can replace it,
and it finds only the kernel's descendants: a cell that turns the kernel's subreaper flag
off before it double-forks leaves an orphan that is nobody's descendant there. So the host
does it again from outside, through the kernel's cgroup, by elimination: when the kernel
said it was ready, before any cell ran, every process in its cgroup was part of the
sandbox itself (the kernel, the namespace's init, an allow-list proxy bridge), and
:func:`snapshot` notes them by pid and start time. After a cell, every other member is
stopped, then killed (:func:`sweep`), whoever its parent.

Without a cgroup (level ``none``, or a non-root host) there is nothing to sweep from
outside.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable

from execengine.hostdirs import start_time
from execengine.isolation import cgroups

#: how long the sweep goes on while it still finds processes (forks racing it)
SWEEP_SECONDS = 1.0

#: a process, told apart from a later one that got its pid: (pid, start time)
Process = tuple[int, int | None]


def snapshot(cgroup_dirs: Iterable[str]) -> frozenset[Process]:
    """The processes in the cgroup now."""
    return frozenset((pid, start_time(pid)) for pid in cgroups.members(cgroup_dirs))


def strays(cgroup_dirs: Iterable[str], keep: frozenset[Process]) -> list[int]:
    """Host pids of the processes in the cgroup that are not in ``keep``."""
    return [pid for pid in cgroups.members(cgroup_dirs)
            if (pid, start_time(pid)) not in keep]


def sweep(cgroup_dirs: Iterable[str], keep: frozenset[Process] | None) -> int:
    """Stop, then kill, every process in the cgroup but those in ``keep``, until none is
    left (or :data:`SWEEP_SECONDS` pass); how many were killed."""
    dirs = tuple(cgroup_dirs)
    if not dirs or not keep:
        return 0
    killed: set[int] = set()
    deadline = time.monotonic() + SWEEP_SECONDS
    while time.monotonic() < deadline:
        fresh = [pid for pid in strays(dirs, keep) if pid not in killed]
        if not fresh:
            break
        for sig in (signal.SIGSTOP, signal.SIGKILL):  # no forking while we kill
            for pid in fresh:
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)
        killed.update(fresh)
    return len(killed)
