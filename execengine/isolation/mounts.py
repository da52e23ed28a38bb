"""The private file-system view of level ``isolated``, built inside a new mount namespace.

Runs as root in the sandbox's entry (see :mod:`.entry`), before the uid drop. The new root
is a small tmpfs holding:

* read-only binds of the system directories (``/usr``, ``/etc``, ``/lib*``; merged-``/usr``
  symlinks such as ``/bin -> usr/bin`` are recreated as symlinks), of the interpreter prefix
  and of the extra readable paths, at their host paths (so ``sys.prefix`` is unchanged and
  an interpreter under a 0700 home is reachable);
* read-write binds of the writable paths (working directory, staging), each id-mapped to
  its owner when the host asks for it (see :mod:`.owner`);
* a read-only bind of the RPC socket directory (connecting to a socket needs no writable
  mount);
* a size-limited tmpfs ``/tmp`` and ``/dev/shm``, a minimal ``/dev`` and a fresh ``/proc``
  of the new pid namespace.

In two steps, so that the slow part happens ahead of the launch, in a warm entry:

1. :func:`prepare_root` builds the fixed part and :func:`enter_root` pivots into it and
   detaches the old root (detaching the host's mount tree waits for an RCU grace period,
   up to several ms on a busy host);
2. at launch the spawner, still in the host's mount namespace, makes detached copies of
   the execution's paths (:func:`clone_binds`: ``open_tree``, attributes set with
   ``mount_setattr``) and sends them along with the plan; :func:`attach` moves them into
   the root (``move_mount``) and makes the root read-only.

``restricted`` has no root of its own. As root it still enters a mount namespace of its
own (:func:`own_view`, ahead of the launch), where :func:`attach_over` puts the same kind
of binds over the host's view: the writable paths id-mapped to their owners, the
protected paths read-only, the denied paths inside the writable ones masked.
"""

from __future__ import annotations

import ctypes
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
CLONE_NEWNS = 0x00020000
MS_SLAVE = 1 << 19
MNT_DETACH = 2
UMOUNT_NOFOLLOW = 8
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
MOVE_MOUNT_T_EMPTY_PATH = 0x40
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
MOUNT_ATTR_NOEXEC = 0x8
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


def _open_tree(path: str, at: int = AT_FDCWD) -> int:
    """A detached copy of the mount tree at ``path`` (close-on-exec); with ``at`` an open
    descriptor and ``path`` empty, of the very file or folder ``at`` is."""
    fd = _libc.syscall(SYS_OPEN_TREE, at, path.encode(),
                       OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE
                       | (AT_EMPTY_PATH if not path else 0))
    _check(0 if fd >= 0 else -1, f"open_tree {path or at}")
    return int(fd)


def _set_attr(fd: int, attr_set: int, userns_fd: int | None, what: str) -> None:
    attr = _MountAttr(attr_set, 0, 0, userns_fd if userns_fd is not None else 0)
    _check(_libc.syscall(SYS_MOUNT_SETATTR, fd, b"", AT_EMPTY_PATH | AT_RECURSIVE,
                         ctypes.byref(attr), ctypes.sizeof(attr)), f"mount_setattr {what}")


def _move_mount(fd: int, dst: str) -> None:
    _check(_libc.syscall(SYS_MOVE_MOUNT, fd, b"", AT_FDCWD, dst.encode(),
                         MOVE_MOUNT_F_EMPTY_PATH), f"move_mount {dst}")


@dataclass(frozen=True)
class MountPlan:
    #: an empty directory to build the root in (host path); None: no root of its own
    #: (``restricted``): only what :func:`attach_over` puts over the host's view
    new_root: str | None
    read_paths: tuple[str, ...]
    write_paths: tuple[str, ...]
    socket_dir: str | None
    tmp_mb: int
    cwd: str
    #: writable paths shown id-mapped to their owners: path -> a user namespace mapping the
    #: owner's uid and gid to the sandbox's (see :mod:`.owner`); the others are plain binds
    userns: Mapping[str, int] = field(default_factory=dict)
    #: paths inside the writable ones bound read-only over themselves (files that run
    #: later outside the sandbox: the engine's config kept there, ``.git/hooks``); the
    #: folders on the way to them become mount points (see :func:`_chains`)
    protect: tuple[str, ...] = ()
    #: paths never to be seen (the denied ones): where the root shows one (below a system
    #: directory or a bind) it is masked, by an empty tmpfs or file only root may open
    hide: tuple[str, ...] = ()


#: one bind of :func:`clone_binds`: where it appears (its host path) and what it is:
#: ``"dir"`` or ``"file"`` (a detached mount comes with it), ``"link"`` (a symbolic link
#: to ``target``, for a top-level one such as ``/lib64 -> usr/lib64``), ``"maskdir"`` /
#: ``"maskfile"`` (a denied path hidden under an empty mount made in the sandbox), or
#: ``"anchor"`` (a folder of a writable bind bound onto itself in the sandbox); ``"inner"``
#: marks a read-only bind of a path inside a writable one
Bind = dict[str, str]
#: the kinds of bind that come with a detached mount
WITH_MOUNT = ("dir", "file")
#: where the masks of files take their empty content from, in the sandbox's root
MASK_FILE = "/.masked"
#: ... and at ``restricted`` (no root of its own): a folder the launcher makes on the host,
#: under which the entry mounts a tmpfs of its own holding that file
MASK_DIR = "/run/execengine/masks"


def _clone(path: str, *, readonly: bool, userns_fd: int | None = None,
           exact: bool = False) -> tuple[Bind, int | None] | None:
    """A detached copy of ``path`` with its attributes set (None: nothing there).

    ``exact``: a writable path, or one inside a writable path (resolved by the host when
    it checked them): reached from ``/`` through no symbolic link, so a script of another
    execution sharing a folder above it cannot swap it for a link between the host's check
    and this bind (a red team made a working directory ``proj/sub`` a link to a denied
    folder after the check, and the next execution there was bound into that folder,
    writable, as its owner's). A link on the way to a writable path is an error; to a
    path inside one, nothing is bound (nothing there to protect)."""
    if exact:
        return _clone_exact(path, readonly=readonly, userns_fd=userns_fd)
    if not os.path.exists(path):
        return None
    if os.path.islink(path) and os.path.dirname(path) == "/":
        return {"path": path, "kind": "link", "target": os.readlink(path)}, None
    kind = "dir" if os.path.isdir(path) else "file"
    fd = _open_tree(path)  # follows symbolic links: the target, at this path
    return _set_bind_attrs(path, kind, fd, readonly=readonly, userns_fd=userns_fd)


def _clone_exact(path: str, *, readonly: bool, userns_fd: int | None
                 ) -> tuple[Bind, int | None] | None:
    """:func:`_clone` of ``path`` reached through no symbolic link (see there)."""
    at = open_nofollow(path)
    if at is None:
        if not os.path.lexists(path) or readonly:
            return None
        raise OSError(f"cannot bind {path} into the sandbox: it is a symbolic link now, or "
                      "one lies on the way (it changed since it was checked)")
    try:
        kind = "dir" if stat.S_ISDIR(os.fstat(at).st_mode) else "file"
        fd = _open_tree("", at)
    finally:
        os.close(at)
    return _set_bind_attrs(path, kind, fd, readonly=readonly, userns_fd=userns_fd)


def _set_bind_attrs(path: str, kind: str, fd: int, *, readonly: bool,
                    userns_fd: int | None) -> tuple[Bind, int | None]:
    """Set a cloned bind's attributes: nosuid, nodev, read-only or id-mapped (closing
    ``fd`` on failure)."""
    try:
        flags = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (MOUNT_ATTR_RDONLY if readonly else 0)
        if userns_fd is not None:
            # the host counts on the owner's identity here (its file tools act as the
            # owner): no silent fallback to a plain bind
            try:
                _set_attr(fd, flags | MOUNT_ATTR_IDMAP, userns_fd, path)
            except OSError as exc:
                raise OSError(exc.errno, f"cannot show {path} to the sandbox as its "
                              f"owner's (an id-mapped bind): {exc.strerror}") from exc
            return {"path": path, "kind": kind}, fd
        _set_attr(fd, flags, None, path)
    except BaseException:
        os.close(fd)
        raise
    return {"path": path, "kind": kind}, fd


def _userns_of(path: str, plan: MountPlan) -> int | None:
    """The user namespace of the deepest id-mapped writable path holding ``path``."""
    holders = [w for w in plan.userns if w == path or beneath(path, w)]
    return plan.userns[max(holders, key=len)] if holders else None


def clone_binds(plan: MountPlan) -> tuple[list[Bind], list[int]]:
    """The execution's binds as detached mounts, attributes set (read-only ones
    recursively read-only; writable ones id-mapped through ``plan.userns_fd`` where
    possible; all nosuid, nodev), in the order :func:`attach` mounts them: parents first,
    then the protected paths over the writable ones. Runs in the host's mount namespace
    (the spawner). The caller closes the descriptors."""
    if plan.new_root is None:
        return _clone_over(plan)
    binds: list[tuple[str, bool]] = [(p, True) for p in plan.read_paths]
    if plan.socket_dir:
        binds.append((plan.socket_dir, True))
    binds += [(p, False) for p in plan.write_paths]
    ro = {os.path.abspath(p) for p, r in binds if r}
    rw = {os.path.abspath(p) for p, r in binds if not r}
    system = {os.path.abspath(p) for p in SYSTEM_DIRS}
    out: list[Bind] = []
    fds: list[int] = []
    try:
        for path in _ordered(ro | rw):
            if path in system and path not in rw:
                continue  # bound read-only already
            if any(beneath(d, path) for d in system):
                # a parent of a system directory (say "/"): binding it would hide those
                raise OSError(f"cannot expose {path} inside the sandbox: it contains system "
                              f"directories")
            _add(out, fds, _clone(path, readonly=path not in rw, userns_fd=plan.userns.get(
                path) if path in rw else None, exact=path in rw or any(
                    beneath(path, w) for w in rw)))
        _protect(plan, rw, out, fds)
        out += masks(plan.hide, shown=system | ro | rw, needed=ro | rw)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return out, fds


def _protect(plan: MountPlan, rw: set[str], out: list[Bind], fds: list[int]) -> None:
    """The binds that keep the protected paths inside the writable ones read-only."""
    anchors, pinned = _chains(plan.protect, rw)
    # each folder on the way to a protected path becomes a mount point (bound onto
    # itself in the sandbox): renaming or removing it fails (EBUSY), so no folder the
    # host will look in (``.git``) can be moved aside for one the script made
    out += [{"path": path, "kind": "anchor"} for path in anchors]
    for path in _ordered([*plan.protect, *pinned]):
        if any(beneath(path, w) for w in rw) and os.path.lexists(path) \
                and not os.path.islink(path):
            # as the writable bind above it shows it (id-mapped), but read-only
            cloned = _clone(path, readonly=True, userns_fd=_userns_of(path, plan),
                            exact=True)
            if cloned is not None:
                cloned[0]["inner"] = "1"  # mounted on the folder reached in the bind
            _add(out, fds, cloned)


def _clone_over(plan: MountPlan) -> tuple[list[Bind], list[int]]:
    """:func:`clone_binds` without a root of its own (``restricted``): what goes over the
    host's view, in :func:`attach_over`'s order: the id-mapped writable paths over
    themselves, the protected paths inside the writable ones read-only, the denied paths
    inside them masked."""
    rw = {os.path.abspath(p) for p in plan.write_paths}
    ro = {os.path.abspath(p) for p in plan.read_paths}
    if plan.socket_dir:
        ro.add(os.path.abspath(plan.socket_dir))
    out: list[Bind] = []
    fds: list[int] = []
    try:
        for path in _ordered(plan.userns):
            cloned = _clone(path, readonly=False, userns_fd=plan.userns[path], exact=True)
            if cloned is None:
                raise OSError(f"the writable path {path} is gone")
            _add(out, fds, cloned)
        _protect(plan, rw, out, fds)
        out += masks(plan.hide, shown=rw, needed=ro | rw)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return out, fds


def _chains(protect: Iterable[str], rw: set[str]) -> tuple[list[str], set[str]]:
    """The folders between the deepest writable bind holding a protected path and that
    path (parents first), and the first entry on such a way that is a file (the ``.git``
    file of a worktree, which names the repository git uses: pinned read-only itself).
    A way that ends early (missing, a symbolic link) stops there."""
    anchors: set[str] = set()
    pinned: set[str] = set()
    for path in protect:
        root = max((w for w in rw if beneath(path, w)), key=len, default=None)
        if root is None:
            continue
        here = root
        for name in os.path.relpath(path, root).split(os.sep)[:-1]:
            here = os.path.join(here, name)
            if os.path.islink(here) or not os.path.lexists(here):
                break
            if not os.path.isdir(here):
                pinned.add(here)
                break
            anchors.add(here)
    return _ordered(anchors), pinned


def masks(hide: Iterable[str], shown: set[str], needed: set[str]) -> list[Bind]:
    """The masks of the ``hide`` paths the sandbox's root would show: those at or below a
    ``shown`` tree (a system directory, a bind) with nothing ``needed`` (a bind: the
    interpreter, the working directory...) at or below them. A path through a symbolic
    link is masked where it leads."""
    out: list[Bind] = []
    for path in _ordered(os.path.realpath(p) for p in hide):
        if not os.path.lexists(path) or path == "/":
            continue
        if not any(path == d or beneath(path, d) for d in shown):
            continue  # not in the sandbox's view at all
        if any(d == path or beneath(d, path) for d in needed):
            continue  # it would hide what the execution needs
        out.append({"path": path, "kind": "maskdir" if os.path.isdir(path) else "maskfile"})
    return out


def _add(out: list[Bind], fds: list[int], cloned: tuple[Bind, int | None] | None) -> None:
    if cloned is not None:
        out.append(cloned[0])
        if cloned[1] is not None:
            fds.append(cloned[1])


def beneath(path: str, folder: str) -> bool:
    """Whether ``path`` lies inside ``folder`` (not the folder itself); both absolute."""
    return path.startswith(folder.rstrip("/") + "/")


def _bind(src: str, root: str) -> None:
    """A read-only bind of the host's ``src`` at ``root + src`` (a top-level symbolic link
    is recreated as one): the system directories of :func:`prepare_root`."""
    if not os.path.exists(src):
        return
    dst = root + src
    if os.path.islink(src) and os.path.dirname(src) == "/":
        if not os.path.lexists(dst):
            os.symlink(os.readlink(src), dst)
        return
    src = os.path.realpath(src)
    os.makedirs(dst, exist_ok=True)
    mount(src, dst, None, MS_BIND | MS_REC)
    mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | MS_RDONLY)


def _ordered(paths: Iterable[str]) -> list[str]:
    """Unique absolute paths, parents first (a child bind must come after its parent)."""
    seen = {os.path.abspath(p) for p in paths if p}
    return sorted(seen, key=lambda p: (p.count("/"), p))


def _tmpfs_opts(tmp_mb: int) -> str:
    return f"size={tmp_mb}m,mode=1777"


def prepare_root(root: str, tmp_mb: int, interp: Iterable[str] = ()) -> None:
    """The part of the root that is the same for every execution: the root tmpfs, ``/tmp``
    and ``/dev/shm`` (sized ``tmp_mb``), the read-only system binds, ``/dev`` and ``/proc``;
    ``interp``: the interpreter's paths too, bound read-only like the system directories
    (an entry that starts the interpreter ahead; see :func:`.entry.exec_zygote`).
    Done ahead of the launch in a warm entry (it takes about 1 ms), as is
    :func:`enter_root`; :func:`attach` adds the execution's own binds. Caller: root, in a
    fresh mount namespace and (for ``/proc``) a fresh pid namespace."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755")
    # /tmp first: working and staging directories often live below it
    os.makedirs(root + "/tmp")
    mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, _tmpfs_opts(tmp_mb))
    for path in _ordered(SYSTEM_DIRS):
        _bind(path, root)
    system = {os.path.abspath(p) for p in SYSTEM_DIRS}
    for path in _ordered(interp):
        if path not in system and not any(beneath(path, d) for d in system):
            _bind(path, root)
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


def enter_root(root: str) -> None:
    """``pivot_root`` into a root made by :func:`prepare_root` and detach the old one; the
    root stays writable (for the mount points of :func:`attach`)."""
    os.makedirs(root + "/.old")
    pivot_root(root, root + "/.old")
    os.chdir("/")
    umount("/.old", MNT_DETACH)
    os.rmdir("/.old")


def resize_tmp(tmp_mb: int) -> None:
    """In a root :func:`enter_root` entered: ``/tmp`` and ``/dev/shm`` sized ``tmp_mb``
    (their content kept)."""
    for path in ("/tmp", "/dev/shm"):
        mount(None, path, None, MS_REMOUNT | MS_NOSUID | MS_NODEV, _tmpfs_opts(tmp_mb))


#: what :func:`reset_root` brings a root back to: the ids of its mounts, and the names in
#: the root's own file system (mount points included, not what is below them)
RootState = tuple[frozenset[int], frozenset[str]]


def root_state() -> RootState:
    """In a root :func:`enter_root` entered (as its namespace's init): what it holds now
    (see :data:`RootState`), before any execution's binds."""
    return frozenset(m[0] for m in _mountinfo()), frozenset(_own_names())


def reset_root(state: RootState, tmp_mb: int) -> RootState:
    """After an execution (everything of it dead): the root back to ``state``, its fixed
    part, for the next one. Every mount made since is detached (what is below it goes
    with it), ``/tmp`` and ``/dev/shm`` are fresh file systems (sized ``tmp_mb``), what
    was made in the root's own file system since (the mount points of the binds) is
    removed, and the root is writable again. Then the root must be exactly ``state`` but
    for the two fresh mounts' ids: else :class:`OSError` (the caller gives the entry up).
    The new state."""
    ids, names = state
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV)
    for mid, parent, point in _mountinfo():
        if mid not in ids and parent in ids:  # made since, on the fixed root: its tree
            umount(point, MNT_DETACH | UMOUNT_NOFOLLOW)
    fresh = {m[2]: m[0] for m in _mountinfo()}
    for path in ("/tmp", "/dev/shm"):
        umount(path, MNT_DETACH | UMOUNT_NOFOLLOW)
        mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, _tmpfs_opts(tmp_mb))
    now = {m[2]: m[0] for m in _mountinfo()}
    ids = frozenset(ids - {fresh["/tmp"], fresh["/dev/shm"]} | {now["/tmp"], now["/dev/shm"]})
    dev = os.lstat("/").st_dev
    for name in sorted(set(_own_names()) - names, key=lambda n: -n.count("/")):
        st = os.lstat(name)
        if st.st_dev != dev:  # still a mount point: not ours to remove
            raise OSError(f"the root cannot be reset: {name} is still mounted")
        if stat.S_ISDIR(st.st_mode):
            os.rmdir(name)  # empty, or this fails: never a tree's contents
        else:
            os.unlink(name)
    if frozenset(m[0] for m in _mountinfo()) != ids or frozenset(_own_names()) != names:
        raise OSError("the root cannot be reset to its fixed part")
    return ids, names


def _mountinfo() -> list[tuple[int, int, str]]:
    """(mount id, parent id, mount point) of every mount of our view."""
    out = []
    with open("/proc/self/mountinfo", "rb") as fh:
        for line in fh.read().splitlines():
            fields = line.split(b" ")
            out.append((int(fields[0]), int(fields[1]), os.fsdecode(_unescape(fields[4]))))
    return out


def _unescape(raw: bytes) -> bytes:
    """A mountinfo field: space, tab, newline and backslash come as ``\\ooo`` (octal)."""
    parts = raw.split(b"\\")
    out = [parts[0]]
    for part in parts[1:]:
        out.append(bytes([int(part[:3], 8)]) + part[3:])
    return b"".join(out)


def _own_names(top: str = "/") -> list[str]:
    """Every path in the file system of ``top`` (a mount point below it is listed, not
    entered)."""
    dev = os.lstat(top).st_dev
    out: list[str] = []
    pending = [top]
    while pending:
        folder = pending.pop()
        with os.scandir(folder) as it:
            for entry in it:
                out.append(entry.path)
                if entry.is_dir(follow_symlinks=False) and \
                        entry.stat(follow_symlinks=False).st_dev == dev:
                    pending.append(entry.path)
    return out


def attach(binds: list[Bind], fds: list[int], *, cwd: str | None, tmp_mb: int,
           prepared_tmp_mb: int) -> None:
    """In the root :func:`enter_root` entered: resize ``/tmp`` and ``/dev/shm`` when the
    plan's size differs, mount the detached copies of :func:`clone_binds` at their paths
    (closing them, whatever fails), make the root read-only, change to ``cwd`` (unless
    None)."""
    if tmp_mb != prepared_tmp_mb:
        for path in ("/tmp", "/dev/shm"):
            try:
                mount(None, path, None, MS_REMOUNT | MS_NOSUID | MS_NODEV,
                      _tmpfs_opts(tmp_mb))
            except BaseException:
                for fd in fds:
                    os.close(fd)
                raise
    _mount_all(binds, fds, in_place=False)
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    if cwd is not None:
        os.chdir(cwd)


def own_view() -> None:
    """Enter a mount namespace of our own showing the host's mounts, whose changes never
    reach the host's (``restricted``, ahead of the plan: see :func:`attach_over`).
    Caller: root."""
    _check(_libc.unshare(CLONE_NEWNS), "unshare a mount namespace")
    # a slave of the host's mounts: what the host mounts later still shows; what we
    # mount here never propagates back (unshare copies shared mounts as shared)
    mount(None, "/", None, MS_REC | MS_SLAVE)


def attach_over(binds: list[Bind], fds: list[int]) -> None:
    """In the mount namespace :func:`own_view` entered (``restricted``): mount the detached
    copies of :func:`clone_binds` over the host's view at their paths (closing them,
    whatever fails). Nothing is created on the host: a path that is gone is an error for
    a writable bind and skipped for the others (nothing to protect or hide there)."""
    if any(b["kind"] == "maskfile" for b in binds):
        # the masks' empty file, in a tmpfs of our own over a folder the launcher made
        mount("tmpfs", MASK_DIR, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=4k,mode=0700")
    _mount_all(binds, fds, in_place=True)
    if any(b["kind"] == "maskfile" for b in binds):
        mount(None, MASK_DIR, None, MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY)


def _mount_all(binds: list[Bind], fds: list[int], *, in_place: bool) -> None:
    """Mount ``binds`` (their detached mounts: ``fds``, closed here whatever fails); with
    ``in_place`` over the host's own paths, never creating one.

    What lies inside a writable bind (an anchor, a protected path, a mask; at
    ``restricted`` everything) is mounted on a descriptor of the very folder or file,
    reached with no symbolic link on the way: a script of another execution sharing the
    folder may swap a folder for a link meanwhile, and a mount that followed it would
    land elsewhere in this sandbox's view."""
    left = list(fds)
    try:
        for bind in binds:
            path, kind = bind["path"], bind["kind"]
            if kind == "link":
                if not in_place and not os.path.lexists(path):
                    os.symlink(bind["target"], path)
                continue
            fd = left.pop(0) if kind in WITH_MOUNT else None
            if kind in WITH_MOUNT and fd is None:
                raise OSError(f"no mount sent for {path}")
            try:
                if kind in WITH_MOUNT and not in_place and not bind.get("inner"):
                    if kind == "dir":
                        os.makedirs(path, exist_ok=True)
                    else:
                        os.makedirs(os.path.dirname(path), exist_ok=True)
                        if not os.path.exists(path):
                            open(path, "w").close()
                    _move_mount(fd, path)  # type: ignore[arg-type]
                    continue
                target = open_nofollow(path)
                if target is None:
                    if kind == "dir" and in_place and not bind.get("inner"):
                        raise OSError(f"{path} is gone, or a symbolic link now")
                    continue  # nothing to protect or hide there any more
                try:
                    _mount_on(kind, target, fd, MASK_DIR + "/masked" if in_place
                              else MASK_FILE)
                finally:
                    os.close(target)
            finally:
                if fd is not None:
                    os.close(fd)
    finally:
        for fd in left:
            os.close(fd)


def _mount_on(kind: str, target: int, fd: int | None, empty: str) -> None:
    """Mount a bind of ``kind`` (its detached mount ``fd``) on the open ``target``."""
    at = f"/proc/self/fd/{target}"
    if kind in WITH_MOUNT:
        assert fd is not None
        _check(_libc.syscall(SYS_MOVE_MOUNT, fd, b"", target, b"",
                             MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH),
               f"move_mount {at}")
    elif kind == "anchor":
        # a copy of its own mount's attributes (id-mapped, writable): the same folder,
        # now a mount point
        if stat.S_ISDIR(os.fstat(target).st_mode):
            mount(at, at, None, MS_BIND | MS_REC)
    elif kind == "maskdir":
        mount("tmpfs", at, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
              "size=4k,mode=000")
    elif kind == "maskfile":
        if not os.path.exists(empty):  # in a file system of the sandbox's own
            os.close(os.open(empty, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o000))
            os.chmod(empty, 0o000)
        tree = _open_tree(empty)
        try:
            _set_attr(tree, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV
                      | MOUNT_ATTR_NOEXEC, None, empty)
            _mount_on("file", target, tree, empty)
        finally:
            os.close(tree)


def open_nofollow(path: str) -> int | None:
    """An ``O_PATH`` descriptor of ``path`` reached from ``/`` through no symbolic link
    (None: missing, or a link on the way or at the end)."""
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    for part in [p for p in path.split("/") if p]:
        try:
            nxt = os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        except OSError:
            os.close(fd)
            return None
        os.close(fd)
        fd = nxt
        if stat.S_ISLNK(os.fstat(fd).st_mode):
            os.close(fd)
            return None
    return fd
