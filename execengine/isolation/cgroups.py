"""One cgroup per execution: memory limit, pids limit and kill-all, on v1, v2 or hybrid hosts.

The group is created *under our own cgroup* (from ``/proc/self/cgroup``), never at a
hierarchy root: on hybrid hosts the session often sits in a v1 memory cgroup of its own.

* pure v2 (``/sys/fs/cgroup/cgroup.controllers``): one directory; ``memory.max``,
  ``pids.max``, ``cgroup.kill``. The controllers must be enabled in our parent's
  ``cgroup.subtree_control``; when they cannot be, the probe says why.
* hybrid / v1: a directory in the v1 ``memory`` and ``pids`` hierarchies (limits), and one
  in the v2 ``unified`` hierarchy when mounted (``cgroup.kill``, available since 5.14);
  without it, v1 ``freezer`` freezes the group, SIGKILLs every member and thaws it.

A process enters with :meth:`ExecCgroup.enter` (the child calls it on itself before it drops
privileges). :meth:`ExecCgroup.kill` kills every member; :meth:`ExecCgroup.close` kills and
removes the directories (idempotent).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

ROOT = "/sys/fs/cgroup"
PREFIX = "execengine-"


def _own_paths() -> dict[str, str]:
    """controller name (or "" for v2) -> our path in that hierarchy."""
    out: dict[str, str] = {}
    with open("/proc/self/cgroup") as fh:
        for line in fh:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if not controllers:
                out[""] = path
            for c in controllers.split(","):
                out[c] = path
    return out


@dataclass(frozen=True)
class CgroupLayout:
    """Where to create groups: a v2 dir and/or v1 dirs per controller (parents)."""

    v2_parent: str | None
    v2_controllers: bool  # memory/pids available in v2
    v1_parents: tuple[tuple[str, str], ...]  # (controller, parent dir)

    @property
    def can_kill(self) -> bool:
        return self.v2_parent is not None or any(c == "freezer" for c, _ in self.v1_parents)

    @property
    def can_limit(self) -> bool:
        return self.v2_controllers or {"memory", "pids"} <= {c for c, _ in self.v1_parents}


def discover(root: str = ROOT) -> CgroupLayout:
    """Find where this process may create child groups. Raises OSError with a reason."""
    own = _own_paths()
    if os.path.exists(os.path.join(root, "cgroup.controllers")):  # pure v2
        parent = root + own.get("", "/")
        with open(os.path.join(parent, "cgroup.controllers")) as fh:
            ctrls = set(fh.read().split())
        return CgroupLayout(parent.rstrip("/"), {"memory", "pids"} <= ctrls, ())
    v1: list[tuple[str, str]] = []
    for ctrl in ("memory", "pids", "freezer"):
        d = os.path.join(root, ctrl)
        if os.path.isdir(d) and ctrl in own:
            v1.append((ctrl, (d + own[ctrl]).rstrip("/")))
    unified = os.path.join(root, "unified")
    v2 = None
    if os.path.exists(os.path.join(unified, "cgroup.procs")) and "" in own:
        v2 = (unified + own[""]).rstrip("/")
    if v2 is None and not v1:
        raise OSError("no cgroup hierarchy is mounted at " + root)
    return CgroupLayout(v2, False, tuple(v1))


@dataclass
class ExecCgroup:
    """The cgroup(s) of one execution."""

    name: str
    dirs: list[str] = field(default_factory=list)
    kill_dir: str | None = None  # v2 dir with cgroup.kill
    freezer_dir: str | None = None
    _closed: bool = False

    #: (memory_mb, max_processes) last written
    limits: tuple[int | None, int | None] = (None, None)
    _v2_limits: bool = False
    _v1: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, layout: CgroupLayout, name: str, *, memory_mb: int | None,
               max_processes: int | None) -> ExecCgroup:
        group = cls(PREFIX + name)
        try:
            if layout.v2_parent is not None:
                d = os.path.join(layout.v2_parent, group.name)
                os.mkdir(d)
                group.dirs.append(d)
                if os.path.exists(os.path.join(d, "cgroup.kill")):
                    group.kill_dir = d
                group._v2_limits = layout.v2_controllers
            for ctrl, parent in layout.v1_parents:
                d = os.path.join(parent, group.name)
                os.mkdir(d)
                group.dirs.append(d)
                group._v1[ctrl] = d
                if ctrl == "freezer":
                    group.freezer_dir = d
            group.set_limits(memory_mb, max_processes)
        except OSError:
            group.close()
            raise
        return group

    def set_limits(self, memory_mb: int | None, max_processes: int | None) -> None:
        """Write the memory and pids limits (no-op when unchanged). A group prepared ahead
        of its execution gets that execution's limits here, before the script starts."""
        if (memory_mb, max_processes) == self.limits:
            return
        mem = str(memory_mb * 1024 * 1024) if memory_mb else "max"
        pids = str(max_processes) if max_processes else "max"
        if self._v2_limits and self.dirs:
            _write(self.dirs[0], "memory.max", mem)
            with contextlib.suppress(OSError):
                _write(self.dirs[0], "memory.swap.max", "0")
            _write(self.dirs[0], "pids.max", pids)
        if "memory" in self._v1:
            v1mem = mem if memory_mb else "-1"
            d = self._v1["memory"]
            # memsw must stay >= the memory limit: raise it first when the limit grows
            names = ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"]
            if self.limits[0] is not None and memory_mb and memory_mb > self.limits[0]:
                names.reverse()
            for name in names:
                if name.startswith("memory.memsw"):
                    with contextlib.suppress(OSError):  # no swap accounting
                        _write(d, name, v1mem)
                else:
                    _write(d, name, v1mem)
        if "pids" in self._v1:
            _write(self._v1["pids"], "pids.max", pids)
        self.limits = (memory_mb, max_processes)

    def enter(self, pid: int = 0) -> None:
        """Move ``pid`` (0 = the caller) into every directory of the group."""
        for d in self.dirs:
            _write(d, "cgroup.procs", str(pid or os.getpid()))

    def pids(self) -> list[int]:
        return members(self.dirs)

    def oom_kills(self) -> int:
        """How many of the group's processes the kernel's OOM killer has ended: the
        ``oom_kill`` counter of ``memory.events`` (v2) or ``memory.oom_control`` (v1,
        kernel 4.13+); 0 where the group has no memory controller. Read it before
        :meth:`close` removes the directories."""
        if self._v2_limits and self.dirs:
            return _counter(self.dirs[0], "memory.events", "oom_kill")
        if "memory" in self._v1:
            return _counter(self._v1["memory"], "memory.oom_control", "oom_kill")
        return 0

    def kill(self, timeout: float = 2.0) -> bool:
        """SIGKILL every member; True when the group is empty afterwards."""
        if not self.pids():
            # Already empty (the usual case once the child was reaped): nothing can join an
            # empty group but a migration by root, so that is final. Skipping cgroup.kill
            # matters: it takes the fork lock for writing, an RCU grace period (0-15 ms).
            return True
        if self.kill_dir is not None:
            with contextlib.suppress(OSError):
                _write(self.kill_dir, "cgroup.kill", "1")
        elif self.freezer_dir is not None:
            with contextlib.suppress(OSError):
                _write(self.freezer_dir, "freezer.state", "FROZEN")
            for pid in self.pids():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                _write(self.freezer_dir, "freezer.state", "THAWED")
        else:
            for pid in self.pids():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while self.pids():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def close(self, grace: float = 0.0) -> None:
        """Kill what is left, remove the directories (idempotent). ``grace``: first wait
        that long for members known to be exiting on their own, sparing a cgroup.kill
        (which stalls every fork on the machine for an RCU grace period)."""
        if self._closed:
            return
        self._closed = True
        if self.dirs and grace > 0:
            self._wait_empty(time.monotonic() + grace)
        if self.dirs:
            self.kill()
        for d in reversed(self.dirs):
            for _ in range(200):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.005)  # members still exiting

    def _wait_empty(self, deadline: float) -> None:
        """Until the group has no process left, or ``deadline``. Woken by the kernel where
        it can be (cgroup v2: a change of ``populated`` in ``cgroup.events`` wakes a poll
        for POLLPRI); else ``cgroup.procs`` is read every 2 ms (a teardown took 10-20
        such reads, each an open and a read of a kernel file)."""
        events = -1
        with contextlib.suppress(OSError):  # v2 only (its directory comes first)
            events = os.open(os.path.join(self.dirs[0], "cgroup.events"),
                             os.O_RDONLY | os.O_CLOEXEC)
        if events < 0:
            while self.pids() and time.monotonic() < deadline:
                time.sleep(0.002)
            return
        try:
            poller = select.poll()
            poller.register(events, select.POLLPRI | select.POLLERR)
            while True:
                if b"populated 0" in os.pread(events, 4096, 0):
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                poller.poll(min(left, 0.1) * 1000)  # bounded, should a wake-up be missed
        except OSError:
            return  # the group's files are gone: kill() and rmdir() tell the rest
        finally:
            os.close(events)

    def __enter__(self) -> ExecCgroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def members(dirs: Iterable[str]) -> list[int]:
    """The pids in the ``cgroup.procs`` of these directories (one execution's group, in
    each hierarchy it spans), sorted; a directory gone meanwhile holds none."""
    found: set[int] = set()
    for d in dirs:
        with contextlib.suppress(OSError), open(os.path.join(d, "cgroup.procs")) as fh:
            found.update(int(x) for x in fh.read().split())
    return sorted(found)


def _write(d: str, name: str, value: str) -> None:
    with open(os.path.join(d, name), "w") as fh:
        fh.write(value)


def _counter(d: str, name: str, key: str) -> int:
    """The value of ``key`` in a flat-keyed cgroup file (0 when absent or unreadable)."""
    try:
        with open(os.path.join(d, name)) as fh:
            for line in fh:
                k, _, v = line.partition(" ")
                if k == key:
                    return int(v)
    except (OSError, ValueError):
        pass
    return 0
