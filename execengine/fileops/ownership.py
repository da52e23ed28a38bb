"""What a file tool creates belongs to the owner of the folder it works in.

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
from collections.abc import Iterator
from pathlib import Path

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
