"""Where a path argument points, and whether a file tool may touch it.

Relative paths resolve against the task's working directory (:func:`execengine.workdirs.
task_cwd`). :class:`PathGuard` refuses the sensitive locations of ``files.denied_paths`` and
always the loaded config file. The check runs on the fully resolved path (symlinks and
``..`` removed), so a link or a ``../..`` detour into a denied folder is refused too; files
named directly in the list are also recognised by inode, which catches hard links.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from execengine.errors import FileOpError

if TYPE_CHECKING:
    from execengine.config import Config


def resolve_path(raw: str, cwd: str) -> Path:
    """An absolute, normalised path (``~`` expanded; symlinks kept, for display)."""
    if not isinstance(raw, str) or not raw.strip():
        raise FileOpError("path must be a non-empty string")
    if "\x00" in raw:
        raise FileOpError("path contains a NUL byte")
    expanded = os.path.expanduser(raw.strip())
    return Path(os.path.normpath(os.path.join(cwd, expanded)))


def display_path(path: Path | str, cwd: str) -> str:
    """``path`` relative to ``cwd`` when it lies below it, else absolute."""
    text = os.fspath(path)
    try:
        rel = os.path.relpath(text, cwd)
    except ValueError:
        return text
    return text if rel == ".." or rel.startswith(".." + os.sep) else rel


@dataclass(frozen=True)
class _Denied:
    shown: str  # as written in the config
    real: str  # fully resolved
    inode: tuple[int, int] | None  # (st_dev, st_ino) when it is an existing file


class PathGuard:
    """Refuses reads and writes of denied paths; build with :meth:`from_config`."""

    def __init__(self, denied: Iterable[str]) -> None:
        entries: list[_Denied] = []
        for shown in denied:
            if not shown:
                continue
            absolute = os.path.abspath(os.path.expanduser(shown))
            real = os.path.realpath(absolute)
            inode = None
            try:
                st = os.stat(real)
            except OSError:
                pass
            else:
                if not os.path.isdir(real):
                    inode = (st.st_dev, st.st_ino)
            entries.append(_Denied(shown, real, inode))
        self._entries = tuple(entries)

    @classmethod
    def from_config(cls, config: Config) -> PathGuard:
        denied = list(config.files.denied_paths)
        if config.source:
            denied.append(config.source)
        return cls(denied)

    def reason(self, path: Path | str) -> str | None:
        """Why ``path`` is denied, or None when it is allowed."""
        real = os.path.realpath(path)
        for entry in self._entries:
            if real == entry.real or real.startswith(entry.real.rstrip(os.sep) + os.sep):
                return entry.shown
        if any(e.inode for e in self._entries):
            try:
                st = os.stat(real)
            except OSError:
                return None
            for entry in self._entries:
                if entry.inode == (st.st_dev, st.st_ino):
                    return entry.shown
        return None

    def check(self, path: Path | str, action: str) -> None:
        """Raise :class:`FileOpError` when ``path`` may not be read or written."""
        hit = self.reason(path)
        if hit is not None:
            raise FileOpError(
                f"Access denied: {action} {os.fspath(path)!r} is not allowed, it is a protected "
                f"location ({hit}; see files.denied_paths)"
            )

    def covers_part_of(self, root: Path | str) -> bool:
        """True when some denied path lies at or below ``root`` (a search must filter)."""
        real = os.path.realpath(root).rstrip(os.sep) + os.sep
        return any((e.real + os.sep).startswith(real) for e in self._entries)


@dataclass(frozen=True)
class Scope:
    """A call's working directory and guard: turns path arguments into checked paths."""

    cwd: str
    guard: PathGuard

    @classmethod
    def for_call(cls, config: Config, cwd: str) -> Scope:
        return cls(cwd, PathGuard.from_config(config))

    def path(self, raw: str, action: str) -> tuple[Path, str]:
        """``(absolute path, display form)``; raises :class:`FileOpError` when denied."""
        path = resolve_path(raw, self.cwd)
        self.guard.check(path, action)
        return path, display_path(path, self.cwd)

    def show(self, path: Path | str) -> str:
        return display_path(path, self.cwd)
