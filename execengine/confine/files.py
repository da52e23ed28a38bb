"""File tools under an execution policy: paths stay beneath the policy's roots.

Two mechanisms, both free of check-then-use races:

* **writes** go through an *anchor*: the target's parent folder is opened beneath its
  writable root (:func:`.beneath.open_beneath`, creating missing folders with ``mkdirat``
  from fds), and the tool then works on ``/proc/self/fd/<parent fd>/<name>``. The kernel
  resolves that magic link to exactly the folder that was checked, whatever the script
  renames meanwhile; a final component that is a symlink is refused (the atomic rename
  would replace the link, never write through it, but refusing is clearer).
* **reads** are checked up front (beneath a readable root, no link out) for a clear error,
  and every file the tool then opens is verified *after* the open, on the fd itself
  (:func:`checked_open`): its real location must lie below a readable root, not be
  denied, and outside the writable roots be world-readable, in folders the sandbox's uid
  may search from the root down (a tool running as root must not read what the sandbox
  uid could not).

When the script runs as another uid than the engine (a root host at ``restricted`` or
``isolated``), a tool acting for it inside the writable roots reaches only what the script
could (see :mod:`.access`): in a writable root it acts in as the folder's owner, what that
owner may (a file read or replaced must be readable, and writable, by it; a folder written
in writable; every folder on the way searchable), and folders the tool makes are the
owner's; in a root where it keeps a slot uid, a file it reads or replaces must be readable
by that uid and the way searchable (files others may read stay editable through the tools,
as before). Else a script reads and rewrites, through ``read_file`` or ``patch``, private
files it cannot open itself.

The active confinement of a call is a context variable set by :class:`Scope`'s ``with``
block, so the helpers that open files deep inside the search and read code consult it
without every signature carrying it.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

from execengine.confine.access import (
    SLOT,
    Identity,
    acl_of,
    may,
    may_fd,
    need_to_read,
    reachable,
)
from execengine.confine.beneath import EscapeError, open_beneath, real_path_of
from execengine.confine.policy import ExecutionPolicy
from execengine.errors import FileOpError
from execengine.isolation import acl

if TYPE_CHECKING:
    from execengine.fileops.paths import PathGuard

ANCHOR_PREFIX = "/proc/self/fd/"

_ACTIVE: contextvars.ContextVar[FileConfinement | None] = contextvars.ContextVar(
    "execengine_file_confinement", default=None)


def is_anchored(path: str | os.PathLike[str]) -> bool:
    """True for a path made by :meth:`FileConfinement.anchor` (do not resolve it)."""
    return os.fspath(path).startswith(ANCHOR_PREFIX)


class FileConfinement:
    """The roots of one policy, applied to the paths of one tool call. Holds the fds of
    its anchors until :meth:`close`."""

    def __init__(self, policy: ExecutionPolicy, guard: PathGuard) -> None:
        self.policy = policy
        self.guard = guard
        self._fds: list[int] = []

    # -- lifecycle ----------------------------------------------------------------------
    def close(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    @contextlib.contextmanager
    def active(self) -> Iterator[FileConfinement]:
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)

    # -- checks -------------------------------------------------------------------------
    def _outside(self, shown: str, action: str, write: bool) -> FileOpError:
        kind = "writable" if write else "readable"
        roots = self.policy.writable_roots if write else self.policy.readable_roots
        return FileOpError(
            f"Access denied: {action} {shown!r} is outside this execution's {kind} roots "
            f"({', '.join(roots) or 'none'}; see the policy section of the configuration)",
            policy_denied=True)

    @staticmethod
    def _private(shown: str, action: str) -> FileOpError:
        return FileOpError(f"Access denied: {action} {shown!r}: the sandbox's uid may not "
                           "read it (a private file or folder of its owner; a tool reaches "
                           "only what the script could see)", policy_denied=True)

    def _root_fd(self, root: str) -> int:
        return os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)

    def who(self, wroot: str | None) -> Identity | None:
        """Who the script is in the writable root ``wroot`` (None: outside the writable
        roots), or None when it runs as the engine's own uid (the kernel checks the tool's
        opens already)."""
        if not self.policy.as_sandbox_uid:
            return None
        owner = self.policy.owner_of(wroot) if wroot is not None else None
        return Identity(*owner) if owner is not None else SLOT

    def verify_fd(self, fd: int, shown: str, action: str = "reading") -> None:
        """Raise :class:`FileOpError` unless the open ``fd`` may be read under the
        policy (where it really is, not where the path said)."""
        try:
            real = real_path_of(fd)
        except OSError as exc:
            raise FileOpError(f"Access denied: cannot tell where {shown!r} is") from exc
        if self.policy.root_of(real, write=False) is None:
            raise self._outside(shown, action, write=False)
        hit = self.guard.reason(real)
        if hit is not None:
            raise FileOpError(f"Access denied: {action} {shown!r} is not allowed, it is a "
                              f"protected location ({hit})", policy_denied=True)
        wroot = self.policy.root_of(real, write=True)
        if wroot is None:
            st = os.fstat(fd)
            need = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(st.st_mode) else 0)
            if st.st_mode & need != need:
                raise FileOpError(f"Access denied: {action} {shown!r}: outside the writable "
                                  "roots only world-readable files may be read",
                                  policy_denied=True)
            # a world-readable file in a folder the sandbox's uid may not search (a 0700
            # folder under /opt, say) is out of its reach all the same
            rroot = self.policy.root_of(real, write=False)
            if (self.policy.as_sandbox_uid and rroot is not None and real != rroot
                    and not reachable(SLOT, rroot, real, st)):
                raise self._private(shown, action)
        else:
            who = self.who(wroot)
            if who is not None and real != wroot:
                st = os.fstat(fd)
                if not may(who, st, acl_of(fd), need_to_read(st)) \
                        or not reachable(who, wroot, real, st):
                    raise self._private(shown, action)

    def check_read(self, path: str, action: str = "reading") -> None:
        """Up-front check of a read: beneath a readable root, no link leading out, and
        allowed as :meth:`verify_fd` says. A missing path passes (the caller reports it)."""
        root = self.policy.root_of(path, write=False)
        if root is None:
            raise self._outside(path, action, write=False)
        rootfd = self._root_fd(root)
        try:
            fd = open_beneath(rootfd, os.path.relpath(path, root), os.O_PATH)
        except EscapeError:
            raise FileOpError(f"Access denied: {action} {path!r}: a link on the way leads "
                              "outside this execution's roots", policy_denied=True) from None
        except (FileNotFoundError, NotADirectoryError):
            return
        finally:
            os.close(rootfd)
        try:
            self.verify_fd(fd, path, action)
        finally:
            os.close(fd)

    def anchor(self, path: str, action: str = "writing") -> Path:
        """``/proc/self/fd/<parent>/<name>`` for a write of ``path``: the parent opened
        beneath its writable root (missing folders created on the way)."""
        root = self.policy.root_of(path, write=True)
        if root is None or path == root:
            raise self._outside(path, action, write=True)
        if self.policy.is_protected(path) or self.policy.is_protected(os.path.realpath(path)):
            raise self._protected(path, action)
        parts = os.path.relpath(path, root).split("/")
        who = self.who(root)
        owner = self.policy.owner_of(root)
        cur = self._root_fd(root)
        try:
            for name in parts[:-1]:
                nxt = self._subdir(cur, name, path, action, who, owner)
                os.close(cur)
                cur = nxt
                # a folder on the way the script may not search holds what its owner keeps
                # from it (the root itself is the script's working directory, or granted)
                if who is not None and not may_fd(who, cur, acl.X):
                    raise self._private(path, action)
            name = parts[-1]
            # acting as the folder's owner: only where the owner may write
            if owner is not None and who is not None and not may_fd(who, cur,
                                                                    acl.W | acl.X):
                raise self._unwritable(path, action)
            # where the folder opened really is: a link on the way, swapped by the script
            # between the check above and the walk, may have led into a protected one
            if self.policy.is_protected(os.path.join(real_path_of(cur), name)):
                raise self._protected(path, action)
            try:
                st = os.lstat(name, dir_fd=cur)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISLNK(st.st_mode):
                raise FileOpError(f"Access denied: {action} {path!r}: it is a symbolic link; "
                                  "tool calls from scripts do not write through links",
                                  policy_denied=True)
            if st is not None and who is not None:
                target = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=cur)
                try:
                    if not may_fd(who, target, acl.R):
                        raise self._private(path, action)
                    if owner is not None and not may_fd(who, target, acl.W):
                        raise self._unwritable(path, action)
                finally:
                    os.close(target)
        except BaseException:
            os.close(cur)
            raise
        self._fds.append(cur)
        return Path(f"{ANCHOR_PREFIX}{cur}/{name}")

    @staticmethod
    def _unwritable(path: str, action: str) -> FileOpError:
        return FileOpError(f"Access denied: {action} {path!r}: the folder's owner, whom the "
                           "script acts as here, may not write it", policy_denied=True)

    @staticmethod
    def _protected(path: str, action: str) -> FileOpError:
        return FileOpError(f"Access denied: {action} {path!r}: a protected path (it runs "
                           "later outside the sandbox; see docs/confinement.md)",
                           policy_denied=True)

    def _subdir(self, cur: int, name: str, path: str, action: str,
                who: Identity | None = None, owner: tuple[int, int] | None = None) -> int:
        """The folder ``name`` in ``cur``, made if missing (as ``owner``'s, when the script
        acts as the owner there: only where that owner may write)."""
        flags = os.O_PATH | os.O_DIRECTORY
        try:
            return open_beneath(cur, name, flags)
        except EscapeError:
            raise FileOpError(f"Access denied: {action} {path!r}: a link on the way leads "
                              "outside this execution's roots", policy_denied=True) from None
        except FileNotFoundError:
            pass
        except NotADirectoryError:
            raise FileOpError(f"Cannot write {path!r}: a parent is not a directory") from None
        if owner is not None and who is not None and not may_fd(who, cur, acl.W | acl.X):
            raise self._unwritable(path, action)
        try:
            os.mkdir(name, 0o777, dir_fd=cur)
            if owner is not None and os.geteuid() == 0:
                os.chown(name, *owner, dir_fd=cur, follow_symlinks=False)
        except FileExistsError:
            pass
        except OSError as exc:
            raise FileOpError(f"Cannot create the folder of {path!r}: "
                              f"{exc.strerror or exc}") from exc
        try:
            return open_beneath(cur, name, flags)
        except EscapeError:
            raise FileOpError(f"Access denied: {action} {path!r}: a link on the way leads "
                              "outside this execution's roots", policy_denied=True) from None


def sandbox_may_enter(policy: ExecutionPolicy, real: str) -> bool:
    """Whether the sandbox's uid could make the folder ``real`` (resolved, beneath one of
    ``policy``'s roots) its working directory by itself: every folder below the root on
    the way, and ``real`` itself, searchable by it. Always True when the script does not
    run as a sandbox uid."""
    if not policy.as_sandbox_uid:
        return True
    wroot = policy.root_of(real, write=True)
    root = wroot or policy.root_of(real, write=False)
    if root is None:
        return False
    if real == root:
        return True  # a root is granted to the sandbox
    owner = policy.owner_of(wroot) if wroot is not None else None
    who = Identity(*owner) if owner is not None else SLOT
    try:
        fd = os.open(real, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        return may_fd(who, fd, acl.X) and reachable(who, root, real, st)
    finally:
        os.close(fd)


def active() -> FileConfinement | None:
    """The confinement of the tool call running in this context, if any."""
    return _ACTIVE.get()


def checked_open(path: str | os.PathLike[str], flags: int = os.O_RDONLY) -> int:
    """``os.open`` for reading; under an active confinement the fd is verified (where it
    really landed) before it is returned. Raises OSError or :class:`FileOpError`.

    Only regular files and folders are opened, confined or not: the open is non-blocking
    and the type is checked on the fd, so a FIFO a script made (or swapped in after a
    listing) cannot hold a host worker in ``open()`` forever, and a device such as
    ``/dev/zero`` cannot feed a tool an endless read."""
    fd = os.open(path, flags | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise FileOpError(f"Cannot read {os.fspath(path)!r}: it is not a regular file "
                              "(a FIFO, socket or device); file tools read only files")
        os.set_blocking(fd, True)
        conf = _ACTIVE.get()
        if conf is not None:
            conf.verify_fd(fd, os.fspath(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_binary(path: str | os.PathLike[str]) -> IO[bytes]:
    """A binary file object from :func:`checked_open`."""
    return os.fdopen(checked_open(path), "rb")


__all__ = ["FileConfinement", "active", "checked_open", "is_anchored", "open_binary",
           "sandbox_may_enter"]
