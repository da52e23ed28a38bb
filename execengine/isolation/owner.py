"""Acting in a folder as its owner: who that is, and whether a sandbox can be shown it so.

A sandbox runs as an unprivileged slot uid (see :mod:`.uids`). In a writable root (the
working directory, the staging directory, ``policy.writable_roots``) it should act as the
folder's owner would: change what the owner may change, and leave what it creates owned by
the owner, with the owner's group and the host's usual modes. As root, an *id-mapped* bind
of the folder does exactly that without giving the sandbox the owner's identity anywhere
else: inside the bind the owner's uid and gid are shown as the slot's, and what the slot
writes lands on disk as the owner's (``isolated`` binds it into its minimal root,
``restricted`` over itself in a mount namespace of the entry's own).

That needs root, the mount API (``open_tree``, ``mount_setattr``: Linux 5.12), a mount
namespace, and a file system that supports id-mapped mounts (ext4, xfs, btrfs, tmpfs
since 6.3...; not NFS). :func:`can_map` finds out for one folder by trying it, in a short
child interpreter (a threaded host must not fork to make the user namespace), once per
mount (and per folder that has mounts below it: a bind takes them along). Where it
cannot, a slot uid keeps its own identity there (ACL grants: it creates files, and
changes only what it made or others may write): see ``docs/confinement.md``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass

#: (mount id, the folder when mounts lie below it) -> whether a bind of it can be
#: id-mapped (and why not): a bind takes the mounts below a folder along, each id-mapped too
_PROBED: dict[tuple[int, str | None], tuple[bool, str]] = {}
_LOCK = threading.Lock()

# run as root in a child interpreter: a user namespace held by a forked child, then the
# very calls the spawner makes for a bind (open_tree, mount_setattr with MOUNT_ATTR_IDMAP),
# and a mount namespace (restricted's binds go into one); "ok" or why not
_PROBE = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def fail(what):
    print(what + ": " + os.strerror(ctypes.get_errno())); sys.exit(1)
class Attr(ctypes.Structure):
    _fields_ = [("set", ctypes.c_uint64), ("clr", ctypes.c_uint64),
                ("prop", ctypes.c_uint64), ("userns", ctypes.c_uint64)]
r, w = os.pipe()
hold_r, hold_w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r); os.close(hold_w)
    if libc.unshare(0x10000000) != 0:
        os._exit(1)
    os.write(w, b"x"); os.read(hold_r, 1); os._exit(0)
os.close(w); os.close(hold_r)
if os.read(r, 1) != b"x":
    print("cannot make a user namespace"); sys.exit(1)
st = os.stat(sys.argv[1])
for name, ident in (("uid_map", st.st_uid), ("gid_map", st.st_gid)):
    with open("/proc/%d/%s" % (pid, name), "w") as fh:
        fh.write("%d 65534 1\n" % ident)
userns = os.open("/proc/%d/ns/user" % pid, os.O_RDONLY)
tree = libc.syscall(428, -100, sys.argv[1].encode(), 1 | os.O_CLOEXEC | 0x8000)
if tree < 0:
    fail("open_tree")
attr = Attr(0x00100000 | 0x2 | 0x4, 0, 0, userns)
if libc.syscall(442, tree, b"", 0x1000 | 0x8000, ctypes.byref(attr), ctypes.sizeof(attr)):
    fail("id-mapped mount")
if libc.unshare(0x00020000) != 0:
    fail("mount namespace")
print("ok")
"""


@dataclass(frozen=True)
class Owner:
    """Who owns a folder: its uid and gid."""

    uid: int
    gid: int

    @classmethod
    def of(cls, path: str) -> Owner:
        st = os.stat(path)
        return cls(st.st_uid, st.st_gid)


def host_umask() -> int:
    """The engine's own umask (read, never set: setting it is not thread-safe). What the
    file tools' new files get, and so what a sandbox's get too."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _mount_id(path: str) -> int | None:
    """The id of the mount ``path`` (a folder, resolved) is on, as ``/proc`` tells it."""
    try:
        fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("mnt_id:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    finally:
        os.close(fd)
    return None


def _has_mounts_below(real: str) -> bool:
    """Whether a mount point lies below the folder ``real`` (``/proc/self/mountinfo``)."""
    prefix = real.rstrip("/") + "/"
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                fields = line.split(" ", 5)
                if len(fields) > 4 and _unescape(fields[4]).startswith(prefix):
                    return True
    except OSError:
        return True  # unknown: probe this very folder
    return False


def _unescape(field: str) -> str:
    """A mountinfo path field (spaces, tabs, newlines and backslashes are octal escapes)."""
    if "\\" not in field:
        return field
    return field.encode().decode("unicode_escape").encode("latin-1").decode(
        "utf-8", "replace")


def can_map(path: str) -> tuple[bool, str]:
    """Whether a sandbox can be shown the folder ``path`` id-mapped to its owner (see the
    module's text), and if not why. Needs root; tried once per mount, in a child
    interpreter."""
    if sys.platform != "linux":
        return False, "id-mapped mounts are Linux-only"
    if os.geteuid() != 0:
        return False, "the host is not root (a script runs as the host's own uid)"
    real = os.path.realpath(path)
    mnt = _mount_id(real)
    if mnt is None:
        return False, f"cannot open {real}"
    key = (mnt, real if _has_mounts_below(real) else None)
    with _LOCK:
        hit = _PROBED.get(key)
    if hit is not None:
        return hit
    try:
        res = subprocess.run([sys.executable, "-I", "-S", "-c", _PROBE, real],
                             capture_output=True, text=True, timeout=20, env={})
        found = (res.returncode == 0 and res.stdout.strip() == "ok",
                 (res.stdout or res.stderr).strip()[-300:] or f"exit {res.returncode}")
    except (OSError, subprocess.TimeoutExpired) as exc:
        found = (False, f"probe failed: {exc}")
    with _LOCK:
        _PROBED[key] = found
    return found


def owned_roots(paths: tuple[str, ...] | list[str]) -> dict[str, Owner]:
    """Of the folders ``paths``, those a sandbox acts in as their owner (resolved path ->
    owner); the rest keep the slot uid's own identity."""
    out: dict[str, Owner] = {}
    for path in paths:
        real = os.path.realpath(path)
        if real in out or not os.path.isdir(real):
            continue
        if can_map(real)[0]:
            try:
                out[real] = Owner.of(real)
            except OSError:
                continue  # gone meanwhile: no bind to make (the launch will say so)
    return out
