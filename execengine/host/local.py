"""This machine as the host: executions at the configured isolation level, the local
terminal (``bash``), file operations in this process."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable

from execengine.config import Config
from execengine.host.base import Host, LocalFiles
from execengine.launch.base import Launcher
from execengine.launch.factory import make_launcher
from execengine.terminal.backend import TerminalBackend
from execengine.terminal.confined import AgentSandbox
from execengine.terminal.local import LocalBackend


class LocalHost(Host):
    """Runs everything on this machine."""

    kind = "local"

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self._lock = threading.Lock()
        self.files = LocalFiles()
        self._sandbox: AgentSandbox | None = None
        self._closed = False

    @classmethod
    def terminal_available(cls, config: Config) -> bool | str:
        if os.name != "posix":
            return "the local terminal needs a POSIX system"
        if shutil.which("bash") is None:
            return "bash is not installed"
        return True

    @classmethod
    def files_available(cls, config: Config) -> bool | str:
        folder = _configured_cwd(config) or os.getcwd()
        if not os.path.isdir(folder):
            return f"working directory {folder!r} does not exist"
        if not os.access(folder, os.R_OK | os.X_OK):
            return f"working directory {folder!r} is not readable"
        return True

    def new_launcher(self) -> Launcher:
        return make_launcher(self.config)

    def terminal_backend(self) -> TerminalBackend:
        cfg = self.config.terminal
        return LocalBackend(kill_grace=cfg.kill_grace, buffer_chars=cfg.background_buffer_chars,
                            max_background=cfg.max_background)

    def default_cwd(self) -> str:
        folder = _configured_cwd(self.config)
        return os.path.abspath(folder) if folder else os.getcwd()

    def task_dirs_start(self) -> str | Callable[[], str]:
        folder = _configured_cwd(self.config)
        return os.path.abspath(folder) if folder else os.getcwd

    def folder_problem(self, path: str) -> str | None:
        if os.path.isdir(path):
            return None
        return "is not a directory" if os.path.lexists(path) else "does not exist"

    def agent_sandbox(self) -> AgentSandbox | None:
        if self.config.terminal.isolation == "none":
            return None
        with self._lock:
            if self._sandbox is None and not self._closed:
                self._sandbox = AgentSandbox(self.config)
            return self._sandbox

    @property
    def holds_resources(self) -> bool:
        return self._sandbox is not None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            sandbox.close()


def _configured_cwd(config: Config) -> str | None:
    """``terminal.cwd`` with ``~`` expanded; None when unset (the process's cwd then)."""
    base = config.terminal.cwd
    return os.path.expanduser(base) if base else None
