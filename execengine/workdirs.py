"""Per-task working directories, shared by the terminal, the file tools and the engine.

A task's directory starts at the host's default (``terminal.cwd``, the process's cwd, or a
remote's ``ssh.cwd``) and changes when its terminal runs ``cd``. File tools resolve
relative paths against it; the engine runs project-mode scripts in it. One
:class:`TaskDirs` per registry: ``ctx.services.workdirs``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from execengine.context import ToolContext


class TaskDirs:
    """``default`` is a task's directory until its terminal ``cd``\\ s elsewhere: a path, or
    a function that names it (the process's cwd, a remote's home)."""

    def __init__(self, default: str | Callable[[], str]) -> None:
        self._default = default
        self._lock = threading.Lock()
        self._dirs: dict[str, str] = {}

    def get(self, task_key: str) -> str:
        with self._lock:
            found = self._dirs.get(task_key)
        if found:
            return found
        default = self._default
        return default if isinstance(default, str) else default()

    def set(self, task_key: str, path: str) -> None:
        with self._lock:
            self._dirs[task_key] = os.path.abspath(path)


def task_cwd(ctx: ToolContext) -> str:
    """The working directory for this call: the call context's ``cwd``, else the task's."""
    explicit = ctx.call.cwd
    if explicit:
        return os.path.abspath(explicit)
    return ctx.services.workdirs.get(ctx.task_key)
