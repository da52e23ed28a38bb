"""The processes of one run, and the one way to stop all of them.

A :class:`ProcessSet` is a root process plus everything it started: while the root is
unreaped, its process group and its descendants (where the root is a subreaper, in a
sandbox or a session's kernel, ``setsid`` and double-forked descendants stay below it); at
any time,
every process whose initial environment carries ``<var>=<token>`` (a per-run marker the
root got at start, inherited by anything it starts, found in ``/proc/<pid>/environ``),
which also finds descendants that left the session and were reparented elsewhere.

Stopping is bounded and escalates:

* :meth:`ProcessSet.kill` freezes the whole set with SIGSTOP, rescanning until no new
  member appears (so a fork bomb cannot outrun it) and no process started since the root
  is inside ``exec`` (its environment reads empty until the new program's is in place),
  SIGKILLs every frozen process, and waits until each is confirmed dead; it reports
  whether that confirmation came.
* :meth:`ProcessSet.terminate` sends SIGTERM to every member, waits up to a grace period
  for the set to empty, then kills what is left, and reports which step ended it.

Signals go through pidfds opened after the scan and checked against the process's start
time, so a pid the kernel reused since the scan (``pid_max`` can be as low as 32768) is
never signalled. The group is signalled with ``killpg`` only while the root is unreaped:
its pid, the group id, cannot have been reused then. After the root is reaped, a process
still in that group counts only when no process holds the root's pid (a live process with
that pid is a stranger that reused it).

Reaping the root is its owner's job (``Popen.wait``); zombies are not members.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

log = logging.getLogger(__name__)

#: the marker of a code execution's processes (set by the engine)
RUN_TOKEN_VAR = "EXECENGINE_RUN_TOKEN"
#: the marker of a terminal command's processes (set by the local terminal backend)
TERM_TOKEN_VAR = "EXECENGINE_TERM_TOKEN"
#: the marker of an MCP stdio server's processes (set by :mod:`execengine.mcp.lifeline`)
MCP_TOKEN_VAR = "EXECENGINE_MCP_TOKEN"

#: upper bound of the freeze rounds of one kill, seconds
SWEEP_SECONDS = 2.0
#: upper bound of waiting for the killed processes to be gone, seconds
CONFIRM_SECONDS = 2.0
#: the chase after a listing of /proc: at most this many rounds, of this many pids each
CHASE_ROUNDS = 20
CHASE_MAX = 8192
#: how often a grace period looks whether the set is empty
GRACE_TICK = 0.01
#: the lowest pid the kernel hands out again once allocation wraps at pid_max
RESERVED_PIDS = 300
#: a kernel thread's flag in ``/proc/<pid>/stat``
PF_KTHREAD = 0x00200000
#: how long a kill's sweep pauses before it looks again for a process inside exec
HIDDEN_PAUSE = 0.001

#: which step of the shutdown ladder ended a run: it exited by itself, it ended within the
#: grace after SIGTERM, or it needed the kill
EndedBy = Literal["exit", "sigterm", "kill"]


@dataclass(frozen=True)
class Proc:
    """One process as a scan of ``/proc`` saw it."""

    pid: int
    ppid: int
    pgid: int
    state: str
    #: start time in clock ticks since boot: with the pid, the process's identity
    start: int
    #: the kernel's flags (``PF_*``)
    flags: int = 0

    def inside_exec(self) -> bool:
        """Whether this process, whose environment read empty, may be inside ``exec``
        (between the new program's memory and its arguments and environment): neither
        exited nor a kernel thread, with no command line either."""
        return (self.state not in ("Z", "X") and not self.flags & PF_KTHREAD
                and _read(f"/proc/{self.pid}/cmdline", 1) == b"")


def _read(path: str, size: int) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)


def _stat(pid: int) -> Proc | None:
    data = _read(f"/proc/{pid}/stat", 1024)
    if not data:
        return None
    # the fields after the command name (which may hold spaces and parentheses)
    fields = data[data.rindex(b")") + 2:].split()
    try:
        return Proc(pid, int(fields[1]), int(fields[2]), fields[0].decode(),
                    int(fields[19]), int(fields[6]))
    except (IndexError, ValueError):  # pragma: no cover - a kernel we do not know
        return None


def _last_pid() -> int:
    """The pid the kernel allocated last in our pid namespace (0 if unknown)."""
    try:
        with open("/proc/loadavg", "rb") as fh:
            return int(fh.read().split()[-1])
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        return 0


def _allocated(since: int, until: int) -> range | list[int]:
    """The pids allocated after ``since`` up to ``until`` (across a wrap of pid_max)."""
    if until >= since:
        return range(since + 1, until + 1)
    return [*range(since + 1, since + 1 + CHASE_MAX), *range(1, until + 1)]


def _forks() -> int | None:
    """Tasks created since boot (``processes`` in ``/proc/stat``: every fork and thread,
    in every pid namespace)."""
    try:
        with open("/proc/stat", "rb") as fh:
            for line in fh:
                if line.startswith(b"processes "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        pass
    return None


@dataclass(frozen=True)
class Mark:
    """A moment, as ``/proc`` tells the age of processes: the clock ticks since boot (a
    process started later has a start time of at least ``ticks``) and the tasks created
    so far (:func:`_forks`). Take it before forking a :class:`ProcessSet`'s root."""

    ticks: int
    forks: int | None

    @classmethod
    def now(cls) -> Mark:
        # /proc's start times are CLOCK_BOOTTIME in clock ticks, rounded down (both
        # shifted alike in a time namespace)
        hz = os.sysconf("SC_CLK_TCK")
        return cls(time.clock_gettime_ns(time.CLOCK_BOOTTIME) * hz // 1_000_000_000, _forks())


def _pid_max() -> int | None:
    data = _read("/proc/sys/kernel/pid_max", 64)
    try:
        return int(data) if data else None
    except ValueError:  # pragma: no cover
        return None


def allocated_since(root: int, forks: int | None) -> Callable[[int], bool] | None:
    """Whether a pid can have been allocated since process ``root`` was (``forks``: the
    :func:`_forks` count taken then): pids are handed out in increasing order, wrapping at
    pid_max, so those are the pids from ``root`` up to the last one allocated. None (every
    pid can) when the count is unknown, or so many tasks were created since that the
    allocation may have come round to ``root`` again.

    Only a task with CAP_SYS_ADMIN (or CAP_CHECKPOINT_RESTORE) over the pid namespace can
    pick its own pid (``clone3`` with ``set_tid``, ``ns_last_pid``): a script at level
    ``none`` run as root, which the host does not confine anyway; the sandboxes refuse
    ``clone3`` and drop those capabilities."""
    now, pid_max, last = _forks(), _pid_max(), _last_pid()
    if forks is None or now is None or pid_max is None or not last:
        return None
    # a quarter of the pids as margin for the tasks created between the root and the count
    if now - forks >= pid_max * 3 // 4 - RESERVED_PIDS:
        return None
    if last >= root:
        return lambda pid: root <= pid <= last
    return lambda pid: pid >= root or pid <= last


def pids(since: tuple[int, int | None] | None = None) -> Iterator[int]:
    """Every pid of the system (but ours): a listing of ``/proc``, then a chase of the pids
    allocated meanwhile. A process that forks and exits faster than a listing of ``/proc``
    takes (a chain of ``fork(); exit()``) is never in a listing; the chase yields each
    newly allocated pid for the caller to probe at once, a few microseconds each, and
    repeats while new pids keep appearing (bounded), so the chain's current link is found
    alive. Pids that are gone by the time the caller looks are simply not there.

    ``since``: ``(root, forks)``, only the pids that can have been allocated since that
    process was (:func:`allocated_since`): on a host with thousands of processes, the
    listing then yields the few started since, not all of them."""
    me = os.getpid()
    mark = _last_pid()
    seen = {me}
    try:
        names = os.listdir("/proc")
    except OSError:  # pragma: no cover - not Linux
        return
    # after the listing: every pid it holds was allocated by then
    newer = allocated_since(*since) if since is not None else None
    for name in names:
        if name.isdigit() and int(name) not in seen:
            seen.add(int(name))
            if newer is None or newer(int(name)):
                yield int(name)
    for _ in range(CHASE_ROUNDS):
        now = _last_pid()
        if now == mark or not mark:
            break
        fresh = [pid for pid in _allocated(mark, now)[:CHASE_MAX] if pid not in seen]
        mark = now
        for pid in fresh:
            seen.add(pid)
            yield pid


def scan() -> Iterator[Proc]:
    """Every process of the system (but this one), as :func:`pids` finds them."""
    for pid in pids():
        proc = _stat(pid)
        if proc is not None:
            yield proc


def _environ(pid: int) -> bytes | None:
    """The initial environment of ``pid`` (empty while it is inside ``exec``, for a
    kernel thread, and once it has exited), None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/environ", "rb", buffering=0) as fh:
            return fh.read()
    except OSError:
        return None


def _carries(pid: int, needle: bytes) -> bool:
    env = _environ(pid)
    return env is not None and needle in b"\0" + env


def carriers(var: str, token: str) -> list[int]:
    """Live (not zombie) processes whose initial environment holds ``var=token``."""
    needle = f"\0{var}={token}\0".encode()
    return [pid for pid in pids() if _carries(pid, needle) and alive(pid)]


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def alive(pid: int, start: int | None = None) -> bool:
    """Whether ``pid`` runs (a zombie does not); with ``start``, the same process."""
    proc = _stat(pid)
    return proc is not None and proc.state != "Z" and (start is None or proc.start == start)


def send(proc: Proc, sig: int) -> bool:
    """Signal exactly the process ``proc`` describes; False if it is gone (or reused)."""
    try:
        fd = os.pidfd_open(proc.pid)
    except OSError:
        return False
    try:
        # the pidfd names whatever holds the pid now: check that it is the one we scanned
        now = _stat(proc.pid)
        if now is None or now.start != proc.start:
            return False
        signal.pidfd_send_signal(fd, sig)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


class ProcessSet:
    """The processes of one run (see the module docstring).

    ``root_reaped`` says whether the root's pid may have been released (for a
    :class:`subprocess.Popen`, ``returncode is not None``); without a token only the
    group and the descendants are found.
    """

    def __init__(self, root: int, *, root_reaped: Callable[[], bool],
                 var: str | None = None, token: str | None = None,
                 before: Mark | None = None) -> None:
        self.root = root
        self._root_reaped = root_reaped
        # nothing started before the root can be of it: those are skipped, which spares
        # reading the environment of most processes of the system. ``before``, taken
        # before the root was forked, says when without reading the root's stat: that
        # read waits while the root is in execve (0.1 ms typically, up to 4 ms measured
        # on the launch's path). Else the root's own start (so build the set while the
        # root is unreaped: later its pid may name a stranger).
        if before is not None:
            self._since, self._forks = before.ticks, before.forks
        else:
            me = _stat(root)
            self._since = me.start if me is not None else 0
            self._forks = _forks()
        self._needle = f"\0{var}={token}\0".encode() if var and token else None
        #: how many processes the last scan found inside ``exec``, started since the root:
        #: their token cannot be read yet (:meth:`kill` looks again)
        self.hidden = 0

    @classmethod
    def of_popen(cls, popen: subprocess.Popen[bytes], var: str | None = None,
                 token: str | None = None, before: Mark | None = None) -> ProcessSet:
        return cls(popen.pid, root_reaped=lambda: popen.returncode is not None,
                   var=var, token=token, before=before)

    # -- who ----------------------------------------------------------------------------
    def scan(self, visit: Callable[[Proc], object] | None = None) -> list[Proc]:
        """Every live member right now (the root included while it runs). ``visit`` is
        called on each as soon as it is known to be one: a token carrier at once, while
        the scan goes on (a process that forks and exits is caught before it can).

        Once the root is reaped and its group is empty (the usual case when a script
        ended by itself) only the token matters: the scan then reads each process's
        environment and nothing else, the cheapest pass over ``/proc`` there is."""
        full = not self._root_reaped() or _group_exists(self.root)
        every: list[Proc] = []
        found: dict[int, Proc] = {}
        hidden = 0
        for pid in pids((self.root, self._forks)):
            p: Proc | None = None
            if full:
                p = _stat(pid)
                if p is None or p.start < self._since:
                    continue
                every.append(p)
                if p.state == "Z":
                    continue
            if self._needle is None:
                continue
            env = _environ(pid)
            if env is None or (env and self._needle not in b"\0" + env):
                continue
            if p is None:
                p = _stat(pid)
                if p is None or p.state == "Z" or p.start < self._since:
                    continue
            if not env:  # inside exec, or a kernel thread, or exiting
                hidden += p.inside_exec()
                continue
            found[pid] = p
            if visit is not None:
                visit(p)
        self.hidden = hidden
        if not full:
            return list(found.values())
        procs = [p for p in every if p.state != "Z"]
        reaped = self._root_reaped()  # after the scan: unreaped throughout it if False
        others: dict[int, Proc] = {}
        if not reaped:
            children: dict[int, list[Proc]] = {}
            for p in procs:
                children.setdefault(p.ppid, []).append(p)
            todo = [self.root]
            while todo:
                for p in children.get(todo.pop(), ()):
                    if p.pid not in others:
                        others[p.pid] = p
                        todo.append(p.pid)
        # the group: while the root is unreaped, or (after) while nobody holds its pid
        group = not reaped or all(p.pid != self.root for p in every)
        for p in procs:
            if (not reaped and p.pid == self.root) or (group and p.pgid == self.root):
                others[p.pid] = p
        for p in others.values():
            if p.pid not in found:
                found[p.pid] = p
                if visit is not None:
                    visit(p)
        return list(found.values())

    def members(self) -> list[int]:
        """The pids of :meth:`scan`."""
        return [p.pid for p in self.scan()]

    # -- signals --------------------------------------------------------------------------
    def _killpg(self, sig: int) -> bool:
        if self._root_reaped():
            return False
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.root, sig)
        return True

    def signal(self, sig: int) -> int:
        """Send ``sig`` once to every member (the group at once, while the root is
        unreaped; the others one by one); how many members there were."""
        procs = self.scan()
        grouped = self._killpg(sig)
        for p in procs:
            if not (grouped and p.pgid == self.root):  # got it from killpg already
                send(p, sig)
        return len(procs)

    def kill(self, *, sweep: float = SWEEP_SECONDS, confirm: float = CONFIRM_SECONDS) -> bool:
        """Freeze every member (SIGSTOP, rescanning until nothing new appears, at most
        ``sweep`` seconds), SIGKILL them all, and wait up to ``confirm`` seconds until they
        are gone. True when every member found was confirmed dead."""
        deadline = time.monotonic() + sweep
        frozen: dict[int, Proc] = {}
        self._killpg(signal.SIGSTOP)

        def freeze(p: Proc) -> None:
            if p.pid not in frozen and send(p, signal.SIGSTOP):
                frozen[p.pid] = p

        while True:
            before = len(frozen)
            self.scan(freeze)
            if len(frozen) == before and not self.hidden:
                break
            if time.monotonic() > deadline:
                log.warning("process set of %d still growing at the kill deadline "
                            "(%d frozen, %d inside exec)", self.root, len(frozen),
                            self.hidden)
                break
            if len(frozen) == before:
                time.sleep(HIDDEN_PAUSE)  # a process inside exec: its token shows soon
        self._killpg(signal.SIGKILL)
        for p in frozen.values():
            send(p, signal.SIGKILL)
        # the root is its owner's to reap: a zombie counts as dead
        left = list(frozen.values())
        gone_by = time.monotonic() + confirm
        while left:
            left = [p for p in left if alive(p.pid, p.start)]
            if not left or time.monotonic() > gone_by:
                break
            time.sleep(0.005)
        if left:
            log.warning("process set of %d: %d processes not confirmed dead after SIGKILL",
                        self.root, len(left))
        return not left

    def terminate(self, grace: float) -> EndedBy:
        """SIGTERM everything, wait up to ``grace`` seconds for the set to empty, then
        :meth:`kill` what is left; which step ended it."""
        if not self.signal(signal.SIGTERM):
            self.kill()  # nothing was found; the kill's sweep confirms it
            return "exit"
        end = time.monotonic() + grace
        while self.scan():
            left = end - time.monotonic()
            if left <= 0:
                self.kill()
                return "kill"
            time.sleep(min(GRACE_TICK, left))
        self.kill()  # whatever started since the last scan
        return "sigterm"
