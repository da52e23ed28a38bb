"""Per-registry terminal state: the backend, each task's working directory, its processes.

Get it with ``ctx.service(TERMINAL, TerminalService)``; ``registry.close()`` closes it, which
kills every background process. The working directory lives in the shared
:class:`execengine.workdirs.TaskDirs`, so the file tools and the engine see where ``cd`` went.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from execengine.childenv import build_child_env
from execengine.errors import TerminalError
from execengine.remote.host import REMOTE, RemoteHost
from execengine.terminal.backend import CommandResult, ProcessInfo, TerminalBackend
from execengine.terminal.local import LocalBackend
from execengine.terminal.ssh import SshBackend
from execengine.workdirs import WORKDIRS, TaskDirs

if TYPE_CHECKING:
    from execengine.registry import ToolRegistry

TERMINAL = "terminal"


def local_backend(registry: ToolRegistry) -> TerminalBackend:
    """The configured backend: ``bash`` here, or on the ``ssh`` section's remote."""
    cfg = registry.config.terminal
    if cfg.backend == "ssh":
        return SshBackend(registry.service(REMOTE, RemoteHost), kill_grace=cfg.kill_grace,
                          buffer_chars=cfg.background_buffer_chars,
                          max_background=cfg.max_background)

    return LocalBackend(kill_grace=cfg.kill_grace, buffer_chars=cfg.background_buffer_chars,
                        max_background=cfg.max_background)


class TerminalService:
    """The terminal of one registry. ``backend_factory`` defaults to the configured one."""

    def __init__(self, registry: ToolRegistry,
                 backend_factory: Callable[[ToolRegistry], TerminalBackend] | None = None) -> None:
        self.registry = registry
        self._factory = backend_factory or local_backend
        self._backend: TerminalBackend | None = None

    @property
    def backend(self) -> TerminalBackend:
        if self._backend is None:
            self._backend = self._factory(self.registry)
        return self._backend

    @property
    def dirs(self) -> TaskDirs:
        return self.registry.service(WORKDIRS, TaskDirs)

    def env(self) -> dict[str, str]:
        return build_child_env(os.environ, passthrough=self.registry.env_passthrough,
                               tz=self.registry.config.code_execution.tz)

    def resolve_dir(self, task: str, workdir: str | None) -> str:
        base = self.dirs.get(task)
        backend = self.backend
        if not workdir:
            if not backend.is_dir(base):
                raise TerminalError(f"the working directory of this task no longer exists: "
                                    f"{base}; pass workdir or cd to an existing one")
            return base
        path = os.path.abspath(os.path.join(base, backend.expanduser(workdir)))
        if not backend.is_dir(path):
            raise TerminalError(f"workdir is not a directory: {path}")
        return path

    def run(self, task: str, command: str, *, timeout: float | None = None,
            workdir: str | None = None, pty: bool = False,
            interrupt: threading.Event | None = None) -> CommandResult:
        """Run ``command`` in the task's directory (``workdir`` relative to it); stopped at
        ``timeout`` or once ``interrupt`` is set."""
        cfg = self.registry.config.terminal
        cwd = self.resolve_dir(task, workdir)
        result = self.backend.run(command, cwd=cwd, env=self.env(),
                                  timeout=timeout or cfg.timeout,
                                  max_output_chars=cfg.max_output_chars, pty=pty,
                                  cancel=interrupt)
        if result.cwd and result.cwd != cwd and self.backend.is_dir(result.cwd):
            self.dirs.set(task, result.cwd)
        return result

    def start(self, task: str, command: str, *, workdir: str | None = None,
              pty: bool = False) -> ProcessInfo:
        cwd = self.resolve_dir(task, workdir)
        return self.backend.start(command, task=task, cwd=cwd, env=self.env(), pty=pty)

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()

    def __enter__(self) -> TerminalService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
