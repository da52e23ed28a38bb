"""Bytes on disk: reading a whole text (the editing tools), atomic writes.

:func:`atomic_write` never leaves a half-written file: the data goes to a temporary file in
the same directory, is flushed and fsynced, gets the old file's mode (and owner, when we may
set it) and is renamed over the target; the directory is fsynced after. A symlink target is
written through (the link stays a link).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from execengine.confine.files import is_anchored, open_binary
from execengine.errors import FileOpError
from execengine.fileops.paths import adopt_fd, makedirs
from execengine.fileops.reading import SNIFF_BYTES, looks_binary, open_failed
from execengine.isolation.owner import host_umask


def read_text(path: Path, what: str = "read", *, strict: bool = False) -> str:
    """The whole file as UTF-8 text; binary is refused, and so is invalid UTF-8 if ``strict``.

    Editing tools read strictly: writing back a decoded-with-replacement text would destroy
    the bytes that did not decode.
    """
    data = read_bytes(path, what)
    if looks_binary(data[:SNIFF_BYTES]):
        raise FileOpError(f"Cannot {what} {os.fspath(path)!r}: it is a binary file "
                          f"({len(data)} bytes)", binary=True)
    try:
        return data.decode("utf-8", errors="strict" if strict else "replace")
    except UnicodeDecodeError as exc:
        raise FileOpError(f"Cannot {what} {os.fspath(path)!r}: it is not valid UTF-8 (byte "
                          f"{exc.start}); rewrite it with write_file instead") from None


#: the largest file an editing tool loads whole (a script may make files of up to
#: ``max_file_mb``, sparse ones instantly: without a cap each call of its parallel ones
#: would make the host hold the whole file, twice)
MAX_EDIT_BYTES = 16 * 1024 * 1024


def read_bytes(path: Path, what: str = "read") -> bytes:
    try:
        with open_binary(path) as fh:  # verified under a confining policy
            data = fh.read(MAX_EDIT_BYTES + 1)
            if len(data) > MAX_EDIT_BYTES:
                size = os.fstat(fh.fileno()).st_size
                raise FileOpError(f"Cannot {what} {os.fspath(path)!r}: it is too large "
                                  f"({size} bytes; the tools edit files of at most "
                                  f"{MAX_EDIT_BYTES} bytes)", file_size=size)
            return data
    except OSError as exc:
        raise open_failed(exc, what, os.fspath(path)) from exc


def bounded_lines(fh: IO[bytes], limit: int) -> Iterator[tuple[bytes, int]]:
    """The lines of ``fh`` (newline kept) as ``(head, skipped)``: ``head`` is at most
    ``limit`` bytes, ``skipped`` the number of characters of the rest of a longer line
    (its newline not counted), which is read and dropped. Memory stays bounded by
    ``limit`` however long a line is (a file of one endless line included)."""
    while True:
        head = fh.readline(limit)
        if not head:
            return
        skipped = 0
        if len(head) == limit and not head.endswith(b"\n"):
            while True:  # the rest of a long line, counted, not kept
                more = fh.readline(limit)
                skipped += len(more.rstrip(b"\r\n").decode("utf-8", errors="replace"))
                if not more or more.endswith(b"\n"):
                    break
        yield head, skipped


def atomic_write(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` atomically; returns True when the file was created.

    An anchored path (a confined call's, :mod:`execengine.confine.files`) is used as is:
    resolving it would give up the folder that was checked. The set-user-ID and
    set-group-ID bits of a replaced file are not carried over (as the kernel drops them
    when an unprivileged writer changes a file)."""
    target = real_target(path)
    if target.is_dir():
        raise FileOpError(f"Cannot write {os.fspath(path)!r}: it is a directory")
    try:
        makedirs(target.parent)
    except FileExistsError:
        raise FileOpError(f"Cannot write {os.fspath(path)!r}: a parent is not a "
                          "directory") from None
    except OSError as exc:
        raise FileOpError(f"Cannot create the folder of {os.fspath(path)!r}: "
                          f"{exc.strerror or exc}") from exc
    try:
        old = os.lstat(target) if is_anchored(target) else os.stat(target)
    except FileNotFoundError:
        old = None
    except OSError as exc:
        raise FileOpError(f"Cannot write {os.fspath(path)!r}: {exc.strerror or exc}") from exc
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise FileOpError(f"Cannot write {os.fspath(path)!r}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            settle(fh.fileno(), old, os.path.join(where_is(target.parent), target.name))
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise FileOpError(f"Cannot write {os.fspath(path)!r}: {exc.strerror or exc}") from exc
        raise
    _fsync_dir(target.parent)
    return old is None


def settle(fd: int, old: os.stat_result | None, real: str) -> None:
    """Give the new file open as ``fd`` (to land at the resolved ``real``) its mode and
    owner: the replaced file's ``old`` ones (without set-user-ID and set-group-ID), else
    the umask's mode and the owner of the root it lies in.

    On the descriptor, never by name: the temporary file lies in a folder the script may
    write, and a red team swapped it for a symbolic link between its creation and a
    ``chmod`` by name, which the host (root) then applied to the link's target (a root
    file outside every root made mode 0777)."""
    if old is not None:
        os.fchmod(fd, stat.S_IMODE(old.st_mode) & ~(stat.S_ISUID | stat.S_ISGID))
        with contextlib.suppress(OSError):
            os.fchown(fd, old.st_uid, old.st_gid)
        return
    os.fchmod(fd, 0o666 & ~host_umask())
    adopt_fd(fd, real)


def where_is(folder: Path) -> str:
    """The resolved location of ``folder`` (an anchored one's: where its descriptor is)."""
    if is_anchored(folder):
        return os.readlink(os.fspath(folder))
    return os.path.realpath(folder)


def real_target(path: Path | str) -> Path:
    """Where a write of ``path`` lands: symlinks resolved, except for anchored paths."""
    return Path(path) if is_anchored(path) else Path(os.path.realpath(path))


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
