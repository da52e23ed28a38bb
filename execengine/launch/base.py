"""The launcher interface.

The engine decides *what* runs (argv, environment, working directory, which paths the
script needs); a :class:`Launcher` decides *how* it is started and killed. Everything the
launcher needs is in a :class:`LaunchSpec`; everything the engine needs back is a
:class:`Child`. Limits are enforced by the parent (the engine's timeout) and by the OS
layers a launcher applies; the child never polices itself.

Work kept off a launch's critical path (:class:`WarmPool`, :class:`Background`): most of
what starting a child costs does not depend on the script. At ``restricted`` and
``isolated`` that is creating a cgroup and moving a process into it (the migration waits
for an RCU grace period: 1-20 ms on the hosts we measured), three forks of a Python process
(about 1 ms each), the namespaces, a uid slot and its first-use sweep; at ``none`` the
interpreter's own start. All of it can be done while the previous script runs. A
:class:`WarmPool` keeps ``size`` such entries ready; a launch takes one and only sends the
plan. An empty pool or a mismatch means a cold start, prepared and used at once: same code,
same guarantees, just slower. Likewise, removing an execution's (already empty) cgroup
directories, revoking its ACL grants and deleting its private tmp do not have to delay the
result: :class:`Background` runs them on one worker thread. It is bounded (each job is)
and leak-free: ``close()`` runs every queued job before returning.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import logging
import operator
import os
import select
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from typing_extensions import Self

    from execengine.config import Config
    from execengine.isolation.detect import IsolationReport


@dataclass(frozen=True)
class LaunchLimits:
    memory_mb: int = 1024
    cpu_seconds: int | None = None
    max_processes: int = 64
    max_file_mb: int = 1024
    tmp_mb: int = 256
    network: bool = False
    #: the host's allow-list proxy (127.0.0.1:<port>): with ``network`` off, the only TCP
    #: destination (Landlock port rule, stream sockets only); without ``proxy_socket`` an
    #: ``isolated`` sandbox shares the host's network namespace to reach it
    proxy_port: int | None = None
    #: the same proxy's Unix socket: at ``isolated`` the sandbox then gets its own, empty
    #: network namespace, where a bridge on ``127.0.0.1:<proxy_port>`` relays to it
    proxy_socket: str | None = None
    #: as root: the sandbox acts in each writable path as its owner (an id-mapped bind,
    #: where the level and the file system allow it; see ``code_execution.workdir_as_owner``
    #: and :mod:`execengine.isolation.owner`)
    workdir_as_owner: bool = True


@dataclass(frozen=True)
class LaunchSpec:
    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: str
    #: a unique marker (also in ``env`` as EXECENGINE_RUN_TOKEN) used to find strays
    run_token: str
    #: directories the script may write (the working directory, the staging directory)
    writable_paths: Sequence[str] = ()
    #: extra directories the script may read (interpreter prefix, project, staging)
    readable_paths: Sequence[str] = ()
    #: the private directory holding the RPC socket; must stay reachable
    socket_dir: str | None = None
    #: file descriptors the child inherits (the watchdog pipe's read end)
    pass_fds: Sequence[int] = ()
    #: paths inside the writable ones that must stay read-only (where the level can: a
    #: read-only bind at ``isolated``)
    protected_paths: Sequence[str] = ()
    #: paths the child must not see (the policy's denied ones), where the level can: masked
    #: by an empty mount at ``isolated``; ``~`` is the host's home
    hidden_paths: Sequence[str] = ()
    limits: LaunchLimits = field(default_factory=LaunchLimits)
    #: ``argv`` is ``python -c CODE ARGS...`` and may run in an interpreter the launcher
    #: started ahead under the same environment but for the per-execution variables
    #: (``sandbox/zygote.py``: ``PYTHONPATH``, the RPC endpoint...), as it would have run
    prestart: bool = False
    #: the writable paths and ``cwd`` are resolved paths the caller checked (the engine
    #: refuses system and home folders, denied paths): a launcher binds them as named,
    #: never resolving them again, and refuses the launch when one resolves elsewhere now
    #: (a symbolic link another execution swapped in since the check)
    resolved: bool = False


class Child(abc.ABC):
    """A started child. ``stdout``/``stderr`` are the read ends of its pipes (binary)."""

    pid: int
    stdout: IO[bytes]
    stderr: IO[bytes]

    @abc.abstractmethod
    def poll(self) -> int | None:
        """The exit status if the main process ended (negative = killed by that signal)."""

    @abc.abstractmethod
    def wait(self, timeout: float | None = None) -> int | None:
        """Wait up to ``timeout`` for the main process; its status, or None."""

    @abc.abstractmethod
    def terminate(self) -> None:
        """Ask everything of this execution to stop (SIGTERM to all of it)."""

    @abc.abstractmethod
    def kill(self) -> None:
        """Kill everything of this execution, including descendants that left its process
        group or session, and reap what is ours. After it returns no process of the
        execution runs (zombies of foreign parents may linger until their reaper runs)."""

    _closed = False

    def close(self) -> None:
        """Kill everything of the execution, close the pipes, release what the launcher
        holds for it (:meth:`release`). Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.kill()
        finally:
            self.close_pipes()
            self.release()

    def release(self) -> None:  # noqa: B027 - optional hook
        """What a launcher holds for this child beyond its pipes (cgroup, uid slot, grants,
        a forwarded socket); called once, by :meth:`close`, after the kill."""

    def oom_kills(self) -> int:
        """How many processes of the execution the kernel's OOM killer ended, where the
        launcher can count them (the execution's cgroup); 0 where it cannot (level
        ``none`` has no cgroup). Valid until :meth:`close`."""
        return 0

    def close_pipes(self) -> None:
        """Close the read ends of stdout and stderr (for :meth:`close`)."""
        for pipe in (self.stdout, self.stderr):
            with contextlib.suppress(OSError):
                pipe.close()

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PopenChild(Child):
    """A child that is one :class:`subprocess.Popen` here (the interpreter itself, or the
    ``ssh`` client carrying it): its pipes, exit status and wait."""

    def __init__(self, proc: subprocess.Popen[bytes],
                 pipes: tuple[IO[bytes], IO[bytes]] | None = None) -> None:
        """``pipes``: the read ends of its stdout and stderr, when they are not ``proc``'s
        own (made after it started, for an interpreter started ahead)."""
        self._proc = proc
        self.pid = proc.pid
        if pipes is None:
            assert proc.stdout is not None and proc.stderr is not None
            pipes = (proc.stdout, proc.stderr)
        self.stdout, self.stderr = pipes

    def poll(self) -> int | None:
        return self._proc.poll()

    def wait(self, timeout: float | None = None) -> int | None:
        proc = self._proc
        if timeout is not None and proc.returncode is None and not _exits_within(
                proc.pid, timeout):
            return proc.poll()
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None


def _exits_within(pid: int, timeout: float) -> bool:
    """Whether process ``pid`` (our child, not yet reaped) exits within ``timeout``,
    told the moment it does by a pidfd; True where there is none (the caller then waits
    as :class:`subprocess.Popen` does). ``Popen.wait(timeout)`` polls with sleeps that
    grow to 50 ms: a child ending 20 ms in is seen at about 31 ms."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return True
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(max(0.0, timeout) * 1000))
    finally:
        os.close(fd)


class Launcher(abc.ABC):
    """Starts children at one isolation level."""

    #: "none", "restricted" or "isolated" (or "ssh": confined by the remote host)
    level: str = "none"

    @classmethod
    def from_config(cls, config: Config, report: IsolationReport | None = None) -> Self:
        """Build this launcher for ``config`` (``report``: the host's isolation probe, when
        the factory made one). The factory calls this; the default takes no settings."""
        return cls()

    @abc.abstractmethod
    def launch(self, spec: LaunchSpec) -> Child:
        """Start the child described by ``spec``; raise SandboxError if it cannot start."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release launcher-wide resources (a spawner process, interpreters started
        ahead). Idempotent."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- work kept off the critical path -----------------------------------------------------


class Background:
    """One worker thread for deferred jobs; jobs run inline once it is closed."""

    def __init__(self, name: str = "execengine-sandbox") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False

    def submit(self, job: Callable[[], Any]) -> None:
        """Run ``job`` on the worker; inline once closed, or once the interpreter is
        shutting down (an engine closed from ``atexit``: the pool takes nothing then)."""
        with self._lock:
            if not self._closed:
                try:
                    if self._pool is None:
                        self._pool = ThreadPoolExecutor(1, thread_name_prefix=self._name)
                    self._pool.submit(_logged, job)
                    return
                except RuntimeError:  # "cannot schedule new futures after shutdown"
                    pass
        _logged(job)

    def close(self) -> None:
        """Run what is queued, then stop the thread (idempotent)."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


def _logged(job: Callable[[], Any]) -> None:
    try:
        job()
    except Exception:  # a background job has nobody to raise to
        log.warning("sandbox background job failed", exc_info=True)


@dataclass
class WarmEntry:
    """A prepared entry: the spawner-side id plus what the host made for it."""

    id: str
    key: Any  # what must match the launch (e.g. the network flag)
    resources: Any  # slot, cgroup: released by ``discard`` when the entry is not used
    #: the prepared process (host pid), from the moment it was forked
    pid: int = 0
    #: it starts the child's interpreter ahead (see ``sandbox/zygote.py``)
    prestarted: bool = False


class WarmPool:
    """Keeps up to ``size`` warm entries per key (thread-safe).

    ``make(key)`` prepares one (it runs on the background thread); ``discard(entry)`` kills
    an unused one and frees its resources. ``stale(have, want)``: whether an entry made
    for ``have`` is of no more use once ``want`` is asked for (default: any other key).
    """

    def __init__(self, make: Callable[[Any], WarmEntry], discard: Callable[[WarmEntry], None],
                 background: Background, size: int = 1,
                 stale: Callable[[Any, Any], bool] = operator.ne) -> None:
        self._make = make
        self._discard = discard
        self._bg = background
        self.size = size
        self._stale = stale
        self._lock = threading.Lock()
        self._entries: list[WarmEntry] = []
        self._pending: dict[Any, int] = {}
        self._closed = False
        #: consecutive failures to prepare; after a few the pool stops trying
        self._failures = 0

    def take(self, key: Any) -> WarmEntry | None:
        """A warm entry for ``key``, or None (the caller starts a cold one). Entries that
        are stale for ``key`` are discarded: the next ones are made for the key last asked
        for."""
        stale: list[WarmEntry] = []
        found = None
        with self._lock:
            keep = []
            for entry in self._entries:
                if entry.key == key and found is None:
                    found = entry
                elif entry.key != key and self._stale(entry.key, key):
                    stale.append(entry)
                else:
                    keep.append(entry)
            self._entries = keep
        for entry in stale:
            self._bg.submit(functools.partial(self._discard, entry))
        return found

    def refill(self, key: Any) -> None:
        """Ask the background thread to top the pool up with entries for ``key``."""
        with self._lock:
            have = sum(1 for e in self._entries if e.key == key)
            want = self.size - have - self._pending.get(key, 0)
            if self._closed or want <= 0 or self._failures >= 3:
                return
            self._pending[key] = self._pending.get(key, 0) + want
        for _ in range(want):
            self._bg.submit(functools.partial(self._fill, key))

    def _fill(self, key: Any) -> None:
        try:
            with self._lock:
                if self._closed:
                    return
            entry = self._make(key)
        except Exception:
            with self._lock:
                self._failures += 1
            log.debug("cannot prepare a warm sandbox entry", exc_info=True)
            return
        finally:
            with self._lock:
                self._pending[key] -= 1
        with self._lock:
            self._failures = 0
            if not self._closed:
                self._entries.append(entry)
                return
        self._discard(entry)

    def close(self) -> None:
        """Discard every unused entry (idempotent; the caller closes the background)."""
        with self._lock:
            self._closed = True
            entries, self._entries = self._entries, []
        for entry in entries:
            with contextlib.suppress(Exception):
                self._discard(entry)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def entries(self) -> list[WarmEntry]:
        """The entries ready now (a copy)."""
        with self._lock:
            return list(self._entries)
