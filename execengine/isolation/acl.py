"""POSIX ACL entries for the sandbox group, written as the ``system.posix_acl_*`` xattrs.

When the host is root the script runs as an unprivileged slot uid (group
:data:`~.uids.SANDBOX_GID`). It must still reach the interpreter (CI's lives under root's
0700 home), the staging and socket directories and the working directory. We grant exactly
that, to the sandbox group only, with ACL entries rather than ``chmod``:

* ``--x`` on each ancestor directory that others cannot traverse (no listing, no reading);
* ``r-x`` on read-only paths, ``rwx`` plus a default ACL on writable directories, so
  files the script creates stay usable by later sandboxes and by the host.

Traverse grants stay (they expose no names); leaf grants are revoked with :func:`revoke`.
The binary format is ``posix_acl_xattr_header`` (version 2) followed by
``(u16 tag, u16 perm, u32 id)`` entries sorted by tag then id.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import struct

ACCESS = "system.posix_acl_access"
DEFAULT = "system.posix_acl_default"
VERSION = 2
USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
UNDEFINED_ID = 0xFFFFFFFF
R, W, X = 4, 2, 1

Entry = tuple[int, int, int]  # tag, perm, id


def parse(blob: bytes) -> list[Entry]:
    """The entries of an ACL xattr's value."""
    (version,) = struct.unpack_from("<I", blob)
    if version != VERSION:
        raise OSError(errno.EINVAL, f"unknown ACL version {version}")
    return [struct.unpack_from("<HHI", blob, off) for off in range(4, len(blob), 8)]


def _pack(entries: list[Entry]) -> bytes:
    entries = sorted(entries, key=lambda e: (e[0], e[2]))
    return struct.pack("<I", VERSION) + b"".join(struct.pack("<HHI", *e) for e in entries)


def _from_mode(mode: int) -> list[Entry]:
    return [(USER_OBJ, (mode >> 6) & 7, UNDEFINED_ID), (GROUP_OBJ, (mode >> 3) & 7, UNDEFINED_ID),
            (OTHER, mode & 7, UNDEFINED_ID)]


#: a path (a final symbolic link is not followed), or an open descriptor of the very
#: file or folder (what a grant reached through no link uses)
Target = str | int


def read(path: Target, kind: str = ACCESS) -> list[Entry]:
    try:
        if isinstance(path, int):
            return parse(os.getxattr(path, kind))
        return parse(os.getxattr(path, kind, follow_symlinks=False))
    except OSError as exc:
        if exc.errno != errno.ENODATA:
            raise
    if kind == DEFAULT:
        return []
    return _from_mode((os.fstat(path) if isinstance(path, int) else os.lstat(path)).st_mode)


def _with_group(entries: list[Entry], gid: int, perm: int | None, tag: int = GROUP
                ) -> list[Entry]:
    """``entries`` with the named-group entry for ``gid`` (with ``tag=USER``: the
    named-user entry for that uid) set to ``perm`` (None removes it), and the mask
    recomputed as the union of the group class (what setfacl does)."""
    out = [e for e in entries if e[0] != MASK and not (e[0] == tag and e[2] == gid)]
    if perm is not None:
        out.append((tag, perm, gid))
    named = [e for e in out if e[0] in (USER, GROUP)]
    if named:
        mask = 0
        for tag, p, _ in out:
            if tag in (USER, GROUP, GROUP_OBJ):
                mask |= p
        out.append((MASK, mask, UNDEFINED_ID))
    return out


def set_group(path: Target, gid: int, perm: int | None, *, default: bool = False) -> None:
    """Set (or with ``perm=None`` remove) the access entry of ``gid`` on ``path``; with
    ``default`` also the default ACL of a directory."""
    os.setxattr(path, ACCESS, _pack(_with_group(read(path), gid, perm)))
    if default and os.path.isdir(path):
        current = read(path, DEFAULT)
        if perm is None and not current:
            return
        base = current or [e for e in read(path) if e[0] in (USER_OBJ, GROUP_OBJ, OTHER)]
        new = _with_group(base, gid, perm)
        if perm is None and not any(e[0] in (USER, GROUP) for e in new):
            with contextlib.suppress(OSError):
                os.removexattr(path, DEFAULT)
            return
        os.setxattr(path, DEFAULT, _pack(new))


def grant_user(path: str, uid: int, perm: int | None) -> None:
    """A named-user entry for ``uid`` alone (not the sandbox group every slot shares): what
    one execution's private paths, such as its RPC socket, are opened with. ``perm=None``
    removes it."""
    os.setxattr(path, ACCESS, _pack(_with_group(read(path), uid, perm, USER)))


def group_perm(path: Target, gid: int) -> int | None:
    """The *effective* permission of ``gid``'s entry (masked: a later ``chmod`` rewrites
    the mask and can silently void a grant), or None without an entry."""
    entries = read(path)
    mask = next((p for tag, p, _ in entries if tag == MASK), 7)
    for tag, perm, ident in entries:
        if tag == GROUP and ident == gid:
            return perm & mask
    return None


def _others_can(st: os.stat_result, bits: int) -> bool:
    return (st.st_mode & bits) == bits


def grant_traverse(path: str, gid: int) -> list[str]:
    """Give ``gid`` search permission on every ancestor of ``path`` that others cannot
    traverse. Returns the directories changed. An ancestor that is a symbolic link has no
    ACL of its own (what it points to needs the permission: pass the resolved path too)."""
    changed = []
    path = os.path.abspath(path)
    parts = path.split(os.sep)
    for i in range(2, len(parts)):
        d = os.sep.join(parts[:i]) or os.sep
        if os.path.islink(d):
            continue
        st = os.stat(d)
        if not stat.S_ISDIR(st.st_mode) or _others_can(st, stat.S_IXOTH):
            continue
        perm = group_perm(d, gid)
        if perm is None or not perm & X:
            set_group(d, gid, (perm or 0) | X)
            changed.append(d)
    return changed


def grant(path: Target, gid: int, *, write: bool) -> bool:
    """Grant ``gid`` read (and write) access to ``path`` itself; True if anything changed."""
    st = os.stat(path)
    want = R | (W if write else 0)
    if stat.S_ISDIR(st.st_mode) or st.st_mode & 0o111:
        want |= X
    if not write and _others_can(st, want):
        return False
    current = group_perm(path, gid) or 0
    if current & want == want:
        return False
    set_group(path, gid, current | want, default=write)
    return True


def revoke(path: Target, gid: int) -> None:
    """Remove the entries :func:`grant` added (idempotent)."""
    with contextlib.suppress(FileNotFoundError):
        set_group(path, gid, None, default=True)
