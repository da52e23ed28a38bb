"""The private file-system view of level ``isolated``, built inside a new mount namespace.

Runs as root in the sandbox's namespace-init process (see :mod:`.entry`), before the uid
drop. The new root is a small tmpfs holding:

* read-only binds of the system directories (``/usr``, ``/etc``, ``/lib*``; merged-``/usr``
  symlinks such as ``/bin -> usr/bin`` are recreated as symlinks), of the interpreter prefix
  and of the extra readable paths, at their host paths (so ``sys.prefix`` is unchanged and
  an interpreter under a 0700 home is reachable);
* read-write binds of the writable paths (working directory, staging);
* a read-only bind of the RPC socket directory (connecting to a socket needs no writable
  mount);
* a size-limited tmpfs ``/tmp`` and ``/dev/shm``, a minimal ``/dev`` and a fresh ``/proc``
  of the new pid namespace.

Then ``pivot_root`` into it, detach the old root, and remount the new root read-only.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable
from dataclasses import dataclass

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}

# new mount API (same numbers on every architecture)
SYS_OPEN_TREE = 428
SYS_MOVE_MOUNT = 429
SYS_MOUNT_SETATTR = 442
OPEN_TREE_CLONE = 1
OPEN_TREE_CLOEXEC = os.O_CLOEXEC
AT_FDCWD = -100
AT_EMPTY_PATH = 0x1000
AT_RECURSIVE = 0x8000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
MOUNT_ATTR_IDMAP = 0x00100000

SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                        ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


def _check(res: int, what: str) -> None:
    if res != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int,
          data: str | None = None) -> None:
    _check(_libc.mount(source.encode() if source else None, target.encode(),
                       fstype.encode() if fstype else None, flags,
                       data.encode() if data else None), f"mount {target}")


def umount(target: str, flags: int = 0) -> None:
    _check(_libc.umount2(target.encode(), flags), f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    number = SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(f"pivot_root: unknown architecture {os.uname().machine}")
    _check(_libc.syscall(number, new_root.encode(), put_old.encode()), "pivot_root")


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def idmapped_bind(src: str, dst: str, userns_fd: int) -> None:
    """Bind ``src`` at ``dst`` through an id-mapped mount: ids are translated by the user
    namespace ``userns_fd`` (its ``0 <slot> 1`` map makes files of the mapped owner appear
    owned by the slot uid, and files the slot uid creates land on disk as that owner)."""
    fd = _libc.syscall(SYS_OPEN_TREE, AT_FDCWD, src.encode(),
                       OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE)
    _check(0 if fd >= 0 else -1, f"open_tree {src}")
    try:
        attr = _MountAttr(MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, 0,
                          userns_fd)
        _check(_libc.syscall(SYS_MOUNT_SETATTR, fd, b"", AT_EMPTY_PATH | AT_RECURSIVE,
                             ctypes.byref(attr), ctypes.sizeof(attr)), f"idmap {src}")
        _check(_libc.syscall(SYS_MOVE_MOUNT, fd, b"", AT_FDCWD, dst.encode(),
                             MOVE_MOUNT_F_EMPTY_PATH), f"move_mount {dst}")
    finally:
        os.close(fd)


@dataclass(frozen=True)
class MountPlan:
    new_root: str  # an empty directory to build the root in (host path)
    read_paths: tuple[str, ...]
    write_paths: tuple[str, ...]
    socket_dir: str | None
    tmp_mb: int
    cwd: str
    #: a user namespace for id-mapped binds of the writable paths (None: plain binds)
    userns_fd: int | None = None
    #: paths inside the writable ones bound read-only over themselves (files that run
    #: later outside the sandbox: the engine's config kept there, ``.git/hooks``)
    protect: tuple[str, ...] = ()


def _bind(src: str, root: str, *, readonly: bool, userns_fd: int | None = None) -> None:
    if not os.path.exists(src):
        return
    dst = root + src
    if os.path.islink(src) and os.path.dirname(src) == "/":
        if not os.path.lexists(dst):
            os.symlink(os.readlink(src), dst)
        return
    src = os.path.realpath(src)
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if not os.path.exists(dst):
            open(dst, "w").close()
    if userns_fd is not None and not readonly:
        try:
            idmapped_bind(src, dst, userns_fd)
            return
        except OSError:
            pass  # a file system without id-mapped mounts: a plain bind (ACL grants)
    mount(src, dst, None, MS_BIND | MS_REC)
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | (MS_RDONLY if readonly else 0)
    mount(None, dst, None, flags)


def _ordered(paths: Iterable[str]) -> list[str]:
    """Unique absolute paths, parents first (a child bind must come after its parent)."""
    seen = {os.path.abspath(p) for p in paths if p}
    return sorted(seen, key=lambda p: (p.count("/"), p))


def _tmpfs_opts(tmp_mb: int) -> str:
    return f"size={tmp_mb}m,mode=1777"


def prepare_root(root: str, tmp_mb: int) -> None:
    """The part of the root that is the same for every execution: the root tmpfs, ``/tmp``
    and ``/dev/shm`` (sized ``tmp_mb``), the read-only system binds, ``/dev`` and ``/proc``.
    Done ahead of the launch in a warm entry (it takes about 1 ms); :func:`finish_root`
    adds the execution's own binds. Caller: root, in a fresh mount namespace and (for
    ``/proc``) a fresh pid namespace."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755")
    # /tmp first: working and staging directories often live below it
    os.makedirs(root + "/tmp")
    mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, _tmpfs_opts(tmp_mb))
    for path in _ordered(SYSTEM_DIRS):
        _bind(path, root, readonly=True)
    os.makedirs(root + "/dev")
    mount("tmpfs", root + "/dev", "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
    for name in DEVICES:
        if os.path.exists("/dev/" + name):
            open(f"{root}/dev/{name}", "w").close()
            mount("/dev/" + name, f"{root}/dev/{name}", None, MS_BIND)
    os.makedirs(root + "/dev/shm")
    mount("tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, _tmpfs_opts(tmp_mb))
    os.makedirs(root + "/dev/pts")
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{i}", f"{root}/dev/{name}")
    os.symlink("/proc/self/fd", root + "/dev/fd")
    os.makedirs(root + "/proc")
    mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def finish_root(plan: MountPlan, prepared_tmp_mb: int) -> None:
    """Add the execution's binds to a root made by :func:`prepare_root` (resizing ``/tmp``
    and ``/dev/shm`` when the plan's size differs), pivot into it, make it read-only."""
    root = plan.new_root
    if plan.tmp_mb != prepared_tmp_mb:
        for path in (root + "/tmp", root + "/dev/shm"):
            mount(None, path, None, MS_REMOUNT | MS_NOSUID | MS_NODEV,
                  _tmpfs_opts(plan.tmp_mb))
    binds: list[tuple[str, bool]] = [(p, True) for p in plan.read_paths]
    if plan.socket_dir:
        binds.append((plan.socket_dir, True))
    binds += [(p, False) for p in plan.write_paths]
    ro = {os.path.abspath(p) for p, r in binds if r}
    rw = {os.path.abspath(p) for p, r in binds if not r}
    system = {os.path.abspath(p) for p in SYSTEM_DIRS}
    for path in _ordered(ro | rw):
        if path in system and path not in rw:
            continue  # bound read-only already
        if any(d.startswith(path + "/") for d in system):
            # a parent of a system directory (say "/"): binding it would hide those binds
            raise OSError(f"cannot expose {path} inside the sandbox: it contains system "
                          f"directories")
        _bind(path, root, readonly=path not in rw, userns_fd=plan.userns_fd)
    for path in _ordered(plan.protect):
        if any(path.startswith(w + "/") for w in rw) and os.path.lexists(path) \
                and not os.path.islink(path):
            dst = root + path
            mount(dst, dst, None, MS_BIND | MS_REC)
            mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.makedirs(root + "/.old")
    pivot_root(root, root + "/.old")
    os.chdir("/")
    umount("/.old", MNT_DETACH)
    os.rmdir("/.old")
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chdir(plan.cwd)


def build_root(plan: MountPlan) -> None:
    """Both steps at once (a root not prepared ahead)."""
    prepare_root(plan.new_root, plan.tmp_mb)
    finish_root(plan, plan.tmp_mb)
