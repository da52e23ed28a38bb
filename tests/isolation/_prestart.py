"""Getting a launch into a pre-started interpreter (``sandbox/zygote.py``) on purpose."""

from __future__ import annotations

import os
import time
from dataclasses import replace

from execengine.launch.base import Launcher, LaunchSpec


def teach(launcher: Launcher, like: LaunchSpec, timeout: float = 10.0) -> int:
    """Run specs like ``like`` (same interpreter, environment and limits; ``pass`` as the
    code) until every warm entry of ``launcher`` was started for them; the pid of the
    entry the next launch takes."""
    pool = launcher._pool  # type: ignore[attr-defined]
    for _ in range(max(1, pool.size)):
        # each takes the oldest entry; the refill starts one for this spec
        with launcher.launch(replace(like, argv=[like.argv[0], "-c", "pass"])) as first:
            assert first.wait(30) == 0, first.stderr.read()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # entries for other launches (a program exec'd at launch) are kept apart
        entries = [e for e in list(pool._entries) if e.prestarted]
        if len(entries) >= pool.size:
            return int(entries[0].pid)
        time.sleep(0.02)
    raise AssertionError(f"no pre-started entry: {pool._entries}")


def interpreter_of(entry: int) -> int:
    """The pid of the pre-started interpreter of the warm entry ``entry``: the entry itself
    at restricted; at isolated (the entry is its pid namespace's init) the process of that
    namespace running the loader (the namespace's workload, or one forked there from the
    template, which is not below the entry)."""
    import psutil

    inner = os.readlink(f"/proc/{entry}/ns/pid")
    if inner == os.readlink("/proc/self/ns/pid"):
        return entry
    for _ in range(500):
        for proc in psutil.process_iter():
            try:
                if (os.readlink(f"/proc/{proc.pid}/ns/pid") == inner
                        and "_execengine_startup" in " ".join(proc.cmdline())
                        and proc.status() != psutil.STATUS_ZOMBIE):
                    return proc.pid
            except (OSError, psutil.Error):
                continue
        time.sleep(0.02)
    raise AssertionError(f"no pre-started interpreter in the namespace of entry {entry}")
