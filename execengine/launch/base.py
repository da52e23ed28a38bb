"""The launcher interface.

The engine decides *what* runs (argv, environment, working directory, which paths the
script needs); a :class:`Launcher` decides *how* it is started and killed. Everything the
launcher needs is in a :class:`LaunchSpec`; everything the engine needs back is a
:class:`Child`. Limits are enforced by the parent (the engine's timeout) and by the OS
layers a launcher applies; the child never polices itself.
"""

from __future__ import annotations

import abc
import contextlib
import os
import select
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING

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
