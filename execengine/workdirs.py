"""Per-task working directories, shared by the terminal, the file tools and the engine.

A task's directory starts at the host's default (``terminal.cwd``, the process's cwd, or a
remote's ``ssh.cwd``) and changes when its terminal runs ``cd``. File tools resolve
relative paths against it; the engine runs project-mode scripts in it. One
:class:`TaskDirs` per registry: ``ctx.services.workdirs``.

What the host resolves for every execution, reused for a second: each execution names the
same fixed paths (the denied paths, 18 by default; the interpreter's folders; the
configured roots), and resolving them (``realpath``: an ``lstat`` per component, 10-15 µs
a path here) was the largest part of a launch's work on the host. :func:`recent` keeps
what one list resolved to for :data:`TTL` seconds, so what a caller gets is at most that
old; a link changed meanwhile is seen at the next resolution (the file tools' guard,
:class:`execengine.fileops.paths.PathGuard`, is reused the same way).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, TypeVar

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


# -- what the host resolves, reused for a second ------------------------------------------

#: how long (seconds) what one key resolved to is reused
TTL = 1.0
#: keys kept; past this the whole cache is dropped (a caller naming ever-new lists)
MAX_KEYS = 64

T = TypeVar("T")

_cache: dict[Hashable, tuple[float, Any]] = {}
_lock = threading.Lock()


def recent(key: Hashable, build: Callable[[], T]) -> T:
    """``build()``, or what it returned for ``key`` less than :data:`TTL` seconds ago."""
    now = time.monotonic()
    with _lock:
        hit = _cache.get(key)
    if hit is not None and now - hit[0] < TTL:
        return hit[1]  # type: ignore[no-any-return]
    value = build()
    with _lock:
        if len(_cache) >= MAX_KEYS:
            _cache.clear()
        _cache[key] = (now, value)
    return value


def where() -> tuple[str, str | None]:
    """What a relative or ``~`` path depends on: part of every key naming paths."""
    return os.getcwd(), os.environ.get("HOME")


def real_paths(paths: tuple[str, ...]) -> tuple[str, ...]:
    """Each of ``paths`` (``~`` expanded) fully resolved, as of at most :data:`TTL`
    seconds ago."""
    return recent(("real", paths, where()), lambda: tuple(
        os.path.realpath(os.path.expanduser(p)) for p in paths))


def forget() -> None:
    """Drop everything kept (tests that change links between executions)."""
    with _lock:
        _cache.clear()
