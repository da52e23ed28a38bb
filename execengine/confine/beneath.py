"""Opening a path *beneath* a directory without following links out of it.

:func:`open_beneath` resolves ``rel`` relative to an open directory and refuses any
resolution that leaves it: an absolute path, ``..`` above it, a symlink pointing outside,
a ``/proc/<pid>/fd``-style magic link. Where the kernel has ``openat2(2)`` (Linux 5.6+) it
does the whole resolution in one call with ``RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS``,
which is also free of check-then-open races. Elsewhere the fallback opens one component at
a time with ``O_NOFOLLOW`` from the directory's fd; it is stricter (no symlink at all is
followed) and equally race-free, because every step starts from an fd, never a path string.

:func:`real_path_of` names what an open fd really is (``/proc/self/fd``), which is how a
caller verifies, after the fact and without a race, where an open landed.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import stat

from execengine.errors import PathEscapeError

SYS_OPENAT2 = 437  # the same number on every architecture (new syscall table)
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08

_libc = ctypes.CDLL(None, use_errno=True)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]


EscapeError = PathEscapeError  # the name callers here use


def openat2(dirfd: int, path: str, flags: int, mode: int = 0,
            resolve: int = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) -> int:
    """The raw ``openat2`` system call; raises OSError (ENOSYS where missing)."""
    how = _OpenHow(flags | os.O_CLOEXEC, mode if flags & os.O_CREAT else 0, resolve)
    fd = _libc.syscall(SYS_OPENAT2, dirfd, os.fsencode(path), ctypes.byref(how),
                       ctypes.sizeof(how))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return int(fd)


@functools.lru_cache(maxsize=1)
def have_openat2() -> bool:
    """True when the kernel implements openat2 (probed once)."""
    try:
        os.close(openat2(os.open("/", os.O_PATH | os.O_CLOEXEC), ".", os.O_PATH))
    except OSError as exc:
        return exc.errno not in (errno.ENOSYS, errno.EPERM)  # EPERM: a seccomp filter
    return True


def _parts(rel: str) -> list[str]:
    if os.path.isabs(rel) or "\x00" in rel:
        raise EscapeError(f"path is not relative: {rel!r}")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise EscapeError(f"path climbs with '..': {rel!r}")
    return parts


def walk_open(dirfd: int, rel: str, flags: int, mode: int = 0o666) -> int:
    """The fallback: component by component with ``O_NOFOLLOW``; no symlink is followed."""
    parts = _parts(rel)
    if not parts:
        return os.open(".", flags | os.O_CLOEXEC, dir_fd=dirfd)
    cur = dirfd
    try:
        for name in parts[:-1]:
            try:
                nxt = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                              dir_fd=cur)
            except NotADirectoryError:
                if stat.S_ISLNK(os.lstat(name, dir_fd=cur).st_mode):
                    raise EscapeError(f"a symbolic link on the way: {rel!r}") from None
                raise
            if cur != dirfd:
                os.close(cur)
            cur = nxt
        fd = os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=cur)
        if flags & os.O_PATH and stat.S_ISLNK(os.fstat(fd).st_mode):
            os.close(fd)  # O_PATH|O_NOFOLLOW opens the link itself: refuse it
            raise EscapeError(f"a symbolic link at the end: {rel!r}")
        return fd
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise EscapeError(f"a symbolic link at the end: {rel!r}") from None
        raise
    finally:
        if cur != dirfd:
            os.close(cur)


def open_beneath(dirfd: int, rel: str, flags: int, mode: int = 0o666) -> int:
    """An fd for ``rel`` resolved beneath ``dirfd``; :class:`EscapeError` when the
    resolution would leave it (through ``..``, an absolute or outside symlink, a magic
    link); other OSErrors as ``open`` raises them."""
    _parts(rel)
    if have_openat2():
        try:
            return openat2(dirfd, rel or ".", flags, mode)
        except OSError as exc:
            if exc.errno == errno.EXDEV:
                raise EscapeError(f"the path leaves its root: {rel!r}") from None
            if exc.errno == errno.ELOOP:
                raise EscapeError(f"a magic link or a symlink loop: {rel!r}") from None
            raise
    return walk_open(dirfd, rel, flags, mode)


def real_path_of(fd: int) -> str:
    """Where the open file ``fd`` is, as the kernel names it now."""
    return os.readlink(f"/proc/self/fd/{fd}")


def is_beneath(path: str, root: str) -> bool:
    """Lexically: ``path`` is ``root`` or below it (both absolute and normalised)."""
    return path == root or path.startswith(root.rstrip("/") + "/")
