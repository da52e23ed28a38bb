"""The host seam: what a registry's tools and its engine need from where they run.

One :class:`Host` per registry (see :mod:`execengine.host`). The engine asks it for a
launcher and for each execution's policy; the terminal and file tools ask it for their
backends; the task directories start at its default working directory. A host is closed
with the registry that owns it.

The file tools' seam is here too. A file tool's handler is :func:`run_operation` bound to
its name; it hands the operation to the host's :class:`FileBackend`: :class:`LocalFiles`
runs the operation of :mod:`execengine.fileops.ops` in this process, on the call's
:class:`~execengine.fileops.paths.Scope` (:func:`scope_of`); a remote host's backend
(:class:`execengine.remote.files.RemoteFiles`) sends the same operation, the task's working
directory and the denied paths to the remote's file server, which runs the same code there.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from execengine.confine.policy import ExecutionPolicy, policy_of
from execengine.fileops.ops import OPERATIONS, FileSettings, ToolResult
from execengine.fileops.paths import PathGuard, Scope
from execengine.host.confinement import CONFINING_LEVELS, check_workdir, start_proxy
from execengine.workdirs import task_cwd

if TYPE_CHECKING:
    from execengine.config import Config
    from execengine.context import ToolContext
    from execengine.launch.base import Launcher
    from execengine.remote.doctor import Check
    from execengine.terminal.backend import TerminalBackend
    from execengine.terminal.confined import AgentSandbox


class Host(ABC):
    """Where executions, terminal commands and file operations run."""

    #: the host's name as ``execengine doctor`` and the results show it
    kind: ClassVar[str] = ""
    #: whether scripts and their tools act on this machine (False: on another, which has
    #: none of this one's roots and no sandbox layers of ours, see docs/remote.md)
    local: ClassVar[bool] = True

    #: the file tools' backend (shared; closed with the host): each host sets it
    files: FileBackend

    def __init__(self, config: Config) -> None:
        self.config = config

    # -- what the availability checks ask, before any host is built ----------------------

    @classmethod
    def terminal_available(cls, config: Config) -> bool | str:
        """Whether the terminal tools can run (True, or why not)."""
        return True

    @classmethod
    def files_available(cls, config: Config) -> bool | str:
        """Whether the file tools can run (True, or why not)."""
        return True

    @classmethod
    def doctor_checks(cls, config: Config) -> list[Check]:
        """What ``execengine doctor`` checks of this host beyond the isolation layers."""
        return []

    # -- the engine --------------------------------------------------------------------

    @abstractmethod
    def new_launcher(self) -> Launcher:
        """A launcher for an engine; the engine owns it (closing it leaves the host open)."""

    def execution_policy(self, *, cwd: str, level: str, extra_writable: Sequence[str],
                         stack: contextlib.ExitStack) -> ExecutionPolicy:
        """The one policy of an execution in ``cwd`` (its script and every tool call it
        makes); with ``network: allowlist`` its proxy is started and closed (its folder
        removed) with ``stack``, and the policy names the proxy's port and socket. Raises
        :class:`~execengine.errors.SandboxError` for a working directory no sandbox may
        be given."""
        policy = ExecutionPolicy.for_execution(self.config, cwd=cwd, level=level,
                                               local=self.local,
                                               extra_writable=tuple(extra_writable))
        if policy.level in CONFINING_LEVELS:
            # the file tools' guard, resolved once a second for the same denied paths
            # (each launch resolving all 18 of them was the largest item of the host's
            # CPU per launch)
            check_workdir(cwd, policy, PathGuard.from_config(self.config, policy))
        if policy.network != "allowlist":
            return policy
        return start_proxy(policy, stack)

    # -- the tools ---------------------------------------------------------------------

    @abstractmethod
    def terminal_backend(self) -> TerminalBackend:
        """A new terminal backend (the terminal service owns and closes it)."""

    @abstractmethod
    def default_cwd(self) -> str:
        """Where a new task's working directory starts."""

    def task_dirs_start(self) -> str | Callable[[], str]:
        """Where new tasks' working directories start (see :class:`~execengine.workdirs.
        TaskDirs`): a path, or a function that names it when asked."""
        return self.default_cwd

    def folder_problem(self, path: str) -> str | None:
        """Why ``path`` cannot be an execution's working directory ("does not exist", "is
        not a directory"), or None (a host that cannot tell cheaply says None: the
        launch reports it)."""
        return None

    def agent_sandbox(self) -> AgentSandbox | None:
        """The sandbox of the agent's own terminal commands (``terminal.isolation``), or
        None where commands are not sandboxed here."""
        return None

    def script_command_dir(self, execution_cwd: str | None) -> str | None:
        """Where a script's terminal command starts when it names no ``workdir``: the
        execution's working directory (None: the task's, where ``cd`` sticks)."""
        return execution_cwd

    @property
    def holds_resources(self) -> bool:
        """Whether :meth:`close` has something to release (a connection, a sandbox)."""
        return False

    def close(self) -> None:  # noqa: B027 - most hosts hold nothing to release
        """Release what the host holds (idempotent)."""

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- the file tools' backend -----------------------------------------------------------------

class FileBackend(Protocol):
    """Runs one file operation of a tool call; returns the tool's result."""

    def run(self, ctx: ToolContext, op: str, args: dict[str, Any],
            settings: FileSettings) -> ToolResult: ...


class LocalFiles:
    """Operations in this process, within the call's scope (its policy's roots)."""

    def run(self, ctx: ToolContext, op: str, args: dict[str, Any],
            settings: FileSettings) -> ToolResult:
        with scope_of(ctx) as scope:
            return OPERATIONS[op](scope, args, settings)


def run_operation(op: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Run file operation ``op`` (a tool name of :data:`OPERATIONS`) for this call on the
    registry's host. A file tool's handler is this bound to its name
    (``functools.partial(run_operation, "read_file")``)."""
    settings = FileSettings(max_read_chars=ctx.config.files.max_read_chars,
                            search_backend=ctx.call.search_backend,
                            interrupt=ctx.call.interrupt)
    return ctx.services.host.files.run(ctx, op, args, settings)


def scope_of(ctx: ToolContext) -> Scope:
    """The call's working directory (:func:`task_cwd`), the config's path guard and, for a
    call under a confining execution policy, its roots. Use it as a context manager."""
    cwd = task_cwd(ctx)
    policy = policy_of(ctx)
    if policy is None and ctx.origin == "agent" and ctx.config.policy.agent_calls == "confined":
        policy = ExecutionPolicy.for_execution(ctx.config, cwd=cwd, level="none", agent=True)
    return Scope.for_call(ctx.config, cwd, policy)
