"""Per-task working directories, shared by the terminal, the file tools and the engine.

A task's directory starts at ``terminal.cwd`` (or the process's cwd) and changes when its
terminal runs ``cd``. File tools resolve relative paths against it; the execute_code engine
runs project-mode scripts in it. Get the shared instance with
``ctx.service(WORKDIRS, TaskDirs)``.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from execengine.context import ToolContext
    from execengine.registry import ToolRegistry

WORKDIRS = "workdirs"


class TaskDirs:
    def __init__(self, registry: ToolRegistry) -> None:
        base = registry.config.terminal.cwd
        self._default = os.path.abspath(os.path.expanduser(base)) if base else None
        self._lock = threading.Lock()
        self._dirs: dict[str, str] = {}

    def get(self, task_key: str) -> str:
        with self._lock:
            found = self._dirs.get(task_key)
        return found or self._default or os.getcwd()

    def set(self, task_key: str, path: str) -> None:
        with self._lock:
            self._dirs[task_key] = os.path.abspath(path)


def task_cwd(ctx: ToolContext) -> str:
    """The working directory for this call: the call context's ``cwd``, else the task's."""
    explicit = ctx.call.cwd
    if explicit:
        return os.path.abspath(explicit)
    return ctx.service(WORKDIRS, TaskDirs).get(ctx.task_key)
