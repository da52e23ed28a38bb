"""The file tools' arguments: each checked (:func:`string_arg`, :func:`int_arg`), where a
path argument points, and whether a file tool may touch it.

Relative paths resolve against the task's working directory (:func:`execengine.workdirs.
task_cwd`). :class:`PathGuard` refuses the sensitive locations of ``files.denied_paths`` and
always the loaded config file. The check runs on the fully resolved path (symlinks and
``..`` removed), so a link or a ``../..`` detour into a denied folder is refused too; files
named directly in the list are also recognised by inode, which catches hard links.

Building a guard resolves every denied path (18 of them by default: about 0.8 ms here, half
of a small ``read_file``), and every file tool call needs one: :meth:`PathGuard.from_config`
reuses a guard built from the same list for a second (:data:`execengine.workdirs.
TTL`), so what it resolved is at most that old.

What a file tool creates belongs to the owner of the folder it works in.

The file tools run in the engine, often as root. A script's sandbox acts in its working
directory as the folder's owner (:mod:`execengine.isolation.owner`), so a file or folder
``write_file`` or ``patch`` creates for it must be that owner's too, uid and group, or the
script (and the owner) may not change it afterwards. The same holds for the agent's own
calls in its working directory. The modes come from the engine's umask, as the sandbox's.

:class:`~.paths.Scope` sets the call's owned roots (:func:`owned_by`) for its ``with``
block; :func:`adopt` and :func:`makedirs` use them. A host that is not root creates
everything as its own uid and changes nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execengine.confine.files import FileConfinement
from execengine.errors import FileOpError
from execengine.workdirs import recent, where

if TYPE_CHECKING:
    from execengine.config import Config
    from execengine.confine.policy import ExecutionPolicy

#: actions that change the file system (their paths are anchored under a confinement)
WRITE_ACTIONS = frozenset({"writing", "patching"})


# -- the tools' arguments (a missing or mistyped one is a FileOpError) --------------------

def string_arg(args: dict[str, Any], name: str, *, required: bool = True) -> str:
    value = args.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        got = "nothing" if value is None else type(value).__name__
        raise FileOpError(f"{name} must be a string, got {got}")
    return value


def int_arg(args: dict[str, Any], name: str, default: int, *, minimum: int = 0) -> int:
    value = args.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise FileOpError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise FileOpError(f"{name} must be at least {minimum}, got {value}")
    return value


# -- where a path points -------------------------------------------------------------------

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
    def from_config(cls, config: Config, policy: ExecutionPolicy | None = None) -> PathGuard:
        denied = list(config.files.denied_paths)
        if config.source:
            denied.append(config.source)
        if policy is not None:
            denied += policy.denied_paths
        key = tuple(dict.fromkeys(denied))
        return recent((cls, key, where()), lambda: cls(key))

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


@dataclass(frozen=True)
class Scope:
    """A call's working directory and guard: turns path arguments into checked paths.

    With a ``confinement`` (a script's call under an execution policy) reads must stay
    beneath the readable roots and writes are *anchored* beneath the writable roots (see
    :mod:`execengine.confine.files`); use the scope as a context manager so the
    confinement is active for every open and its fds are closed at the end."""

    cwd: str
    guard: PathGuard
    confinement: FileConfinement | None = None
    #: where what the call creates is handed over to the folder's owner (see
    #: :mod:`.ownership`): (resolved root, uid, gid)
    owners: tuple[tuple[str, int, int], ...] = ()
    _lexical: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def for_call(cls, config: Config, cwd: str, policy: ExecutionPolicy | None = None
                 ) -> Scope:
        owners = roots_of(cwd, policy.owners if policy is not None else ())
        if policy is None or not policy.confined:
            return cls(cwd, PathGuard.from_config(config), owners=owners)
        guard = PathGuard.from_config(config, policy)
        return cls(cwd, guard, FileConfinement(policy, guard), owners=owners)

    def path(self, raw: str, action: str) -> tuple[Path, str]:
        """``(absolute path, display form)``; raises :class:`FileOpError` when denied."""
        path = resolve_path(raw, self.cwd)
        self.guard.check(path, action)
        shown = display_path(path, self.cwd)
        if self.confinement is None:
            return path, shown
        if action in WRITE_ACTIONS:
            anchored = self.confinement.anchor(os.fspath(path), action)
            self._lexical[os.fspath(anchored)] = os.fspath(path)
            return anchored, shown
        self.confinement.check_read(os.fspath(path), action)
        return path, shown

    def lexical(self, path: Path | str) -> str:
        """The path as the caller named it (an anchored path mapped back)."""
        return self._lexical.get(os.fspath(path), os.fspath(path))

    def show(self, path: Path | str) -> str:
        return display_path(self.lexical(path), self.cwd)

    def close(self) -> None:
        if self.confinement is not None:
            self.confinement.close()

    def __enter__(self) -> Scope:
        stack = contextlib.ExitStack()
        if self.confinement is not None:
            stack.enter_context(self.confinement.active())
        stack.enter_context(owned_by(self.owners))
        object.__setattr__(self, "_active", stack)  # frozen: the open block's state
        return self

    def __exit__(self, *exc: object) -> None:
        active = self.__dict__.pop("_active", None)
        if active is not None:
            active.close()
        self.close()


# -- who owns a root -----------------------------------------------------------------------

#: the roots of the active call, deepest first: (resolved folder, uid, gid)
_ROOTS: contextvars.ContextVar[tuple[tuple[str, int, int], ...]] = contextvars.ContextVar(
    "execengine_owned_roots", default=())

Roots = tuple[tuple[str, int, int], ...]


def roots_of(cwd: str, owners: Roots) -> Roots:
    """The roots a call's writes are handed over in: ``owners`` (a script's, where it acts
    as the folder's owner), else the call's working directory with its own owner."""
    if owners:
        return owners
    try:
        st = os.stat(cwd)
    except OSError:
        return ()
    return ((os.path.realpath(cwd), st.st_uid, st.st_gid),)


@contextlib.contextmanager
def owned_by(roots: Roots) -> Iterator[None]:
    """Hand what is created in the ``with`` block over to the owners of ``roots``."""
    token = _ROOTS.set(tuple(sorted(roots, key=lambda r: len(r[0]), reverse=True)))
    try:
        yield
    finally:
        _ROOTS.reset(token)


def owner_for(real: str) -> tuple[int, int] | None:
    """(uid, gid) that a new file or folder at the resolved path ``real`` should have, or
    None (outside the roots, or nothing to change here)."""
    if os.geteuid() != 0:
        return None
    for root, uid, gid in _ROOTS.get():
        if real == root or real.startswith(root.rstrip("/") + "/"):
            return uid, gid
    return None


def adopt(path: str | Path, real: str) -> None:
    """Give the file or folder just created at ``path`` (resolved location: ``real``) to the
    owner of the root it lies in (a symbolic link is not followed)."""
    owner = owner_for(real)
    if owner is None:
        return
    st = os.lstat(path)
    if (st.st_uid, st.st_gid) != owner:
        os.chown(path, *owner, follow_symlinks=False)


def adopt_fd(fd: int, real: str) -> None:
    """:func:`adopt` for the open file ``fd`` (resolved location: ``real``): the very file
    the caller made, whatever name it has now."""
    owner = owner_for(real)
    if owner is None:
        return
    st = os.fstat(fd)
    if (st.st_uid, st.st_gid) != owner:
        os.fchown(fd, *owner)


def makedirs(folder: Path) -> None:
    """``folder.mkdir(parents=True, exist_ok=True)``, each folder made handed over."""
    missing: list[Path] = []
    here = folder
    while not here.exists():
        missing.append(here)
        if here.parent == here:
            break
        here = here.parent
    folder.mkdir(parents=True, exist_ok=True)
    for made in reversed(missing):
        with contextlib.suppress(FileNotFoundError):
            adopt(made, os.path.realpath(made))
