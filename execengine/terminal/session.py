"""Per-registry terminal state: the backend, each task's working directory, its processes.

One per registry (``ctx.services.terminal``); ``registry.close()`` closes it, which kills
every background process. The working directory lives in the shared
:class:`execengine.workdirs.TaskDirs`, so the file tools and the engine see where ``cd`` went.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from execengine.childenv import build_child_env
from execengine.errors import TerminalError
from execengine.terminal.backend import CommandResult, ProcessInfo, TerminalBackend
from execengine.workdirs import TaskDirs

if TYPE_CHECKING:
    from execengine.config import Config


class TerminalService:
    """The terminal of one registry: a backend (made by ``backend_factory`` on first use,
    the host's), the task directories, and the variables children may inherit."""

    def __init__(self, config: Config, backend_factory: Callable[[], TerminalBackend],
                 dirs: TaskDirs, passthrough: Callable[[], tuple[str, ...]] = tuple) -> None:
        self.config = config
        self._factory = backend_factory
        self._passthrough = passthrough
        self.dirs = dirs
        self._lock = threading.Lock()
        self._backend: TerminalBackend | None = None

    @property
    def backend(self) -> TerminalBackend:
        with self._lock:
            if self._backend is None:
                self._backend = self._factory()
            return self._backend

    def env(self) -> dict[str, str]:
        return build_child_env(os.environ, passthrough=self._passthrough(),
                               tz=self.config.code_execution.tz)

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
        cfg = self.config.terminal
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

    @property
    def holds_resources(self) -> bool:
        return self._backend is not None

    def close(self) -> None:
        with self._lock:
            backend, self._backend = self._backend, None
        if backend is not None:
            backend.close()

    def __enter__(self) -> TerminalService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
