"""Who the script is where a tool acts for it, and what the kernel would let that one do.

A file tool runs in the engine (often as root); the script it acts for does not. So before
a tool opens or replaces a file for a script, it asks what the script could do there by
itself, as the kernel decides it:

* in a writable root the script acts in as the folder's owner (an id-mapped bind, see
  :mod:`execengine.isolation.owner`): that owner's uid and gid (no other group);
* elsewhere, on a root host at ``restricted`` or ``isolated``: a sandbox slot uid (any of
  them: the owner class for what a sandbox made) and the sandbox group;
* otherwise the script runs as the engine's own uid, and the kernel checks the tool's
  opens already: nothing to ask.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from execengine.isolation import acl
from execengine.isolation.uids import SANDBOX_GID, is_slot_uid


@dataclass(frozen=True)
class Identity:
    """A process's uid and its only group; ``uid=None``: whichever slot uid."""

    uid: int | None
    gid: int

    def owns(self, st: os.stat_result) -> bool:
        return is_slot_uid(st.st_uid) if self.uid is None else st.st_uid == self.uid


#: a sandbox's own identity (a slot uid, the sandbox group)
SLOT = Identity(None, SANDBOX_GID)


def acl_of(fd: int) -> list[acl.Entry] | None:
    """The access ACL of the open ``fd`` (an ``O_PATH`` one too); None without one."""
    try:
        return acl.parse(os.getxattr(f"/proc/self/fd/{fd}", acl.ACCESS))
    except OSError:
        return None


def may(who: Identity, st: os.stat_result, entries: list[acl.Entry] | None, need: int
        ) -> bool:
    """Whether ``who`` gets ``need`` (``acl.R|W|X`` bits) on the inode ``st`` describes
    (``entries``: its access ACL), as the kernel checks it without capabilities: the owner
    class; else a named-user entry (limited by the mask); else the group class (the owning
    group and named groups that match, limited by the mask: any that grants, or none when
    one matched); else the other class."""
    mode = st.st_mode
    if who.owns(st):
        return (mode >> 6) & need == need
    if not entries:
        if st.st_gid == who.gid:
            return (mode >> 3) & need == need
        return mode & need == need
    mask = next((p for tag, p, _ in entries if tag == acl.MASK), 7)
    if who.uid is not None:
        named = [p for tag, p, ident in entries if tag == acl.USER and ident == who.uid]
        if named:
            return named[0] & mask & need == need
    groups = [p for tag, p, ident in entries
              if (tag == acl.GROUP_OBJ and st.st_gid == who.gid)
              or (tag == acl.GROUP and ident == who.gid)]
    if groups:
        return any(p & mask & need == need for p in groups)
    return next((p for tag, p, _ in entries if tag == acl.OTHER), 0) & need == need


def may_fd(who: Identity, fd: int, need: int) -> bool:
    """:func:`may` for the open ``fd``."""
    return may(who, os.fstat(fd), acl_of(fd), need)


def reachable(who: Identity, root: str, real: str, st: os.stat_result) -> bool:
    """Whether ``who`` can reach the inode ``st`` describes at ``real`` by itself: every
    folder strictly below ``root`` down to its parent searchable by it (the root is its
    working directory, or granted). Walked from the root with ``O_NOFOLLOW``, and the last
    step must land on that very inode, so a folder swapped meanwhile fails the check,
    never passes it."""
    rel = os.path.relpath(real, root)
    if rel == "." or rel.startswith(".."):
        return False
    *folders, name = rel.split("/")
    cur = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in folders:
            try:
                nxt = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                              dir_fd=cur)
            except OSError:
                return False
            os.close(cur)
            cur = nxt
            if not may_fd(who, cur, acl.X):
                return False
        try:
            last = os.stat(name, dir_fd=cur, follow_symlinks=False)
        except OSError:
            return False
        return (last.st_dev, last.st_ino) == (st.st_dev, st.st_ino)
    finally:
        os.close(cur)


def need_to_read(st: os.stat_result) -> int:
    """The bits reading needs: read, and for a folder search too."""
    return acl.R | (acl.X if stat.S_ISDIR(st.st_mode) else 0)
