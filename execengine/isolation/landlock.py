"""Landlock through ctypes: file-system and TCP rules for the calling process.

Landlock is an unprivileged LSM: a process restricts itself (and every descendant) to a
ruleset, irreversibly. We use it at levels ``restricted`` and ``isolated``:

* ABI >= 1: every file-system right is *handled*; read/execute is granted beneath the
  system and interpreter directories, read/write beneath the working directory, the private
  tmp and the few device nodes Python needs. Everything else is denied.
* ABI >= 4: TCP bind and connect are handled with no rule, so both are denied.
* ABI >= 6: abstract Unix sockets and signals are scoped to the sandbox's own domain.

The three system calls have the same numbers on every Linux architecture (they were added
after the syscall tables were unified), so no per-architecture table is needed.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass

SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446

CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
RULE_NET_PORT = 2

# file-system access rights, by the ABI that introduced them
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5

NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1

SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

_FS_ABI1 = (1 << 13) - 1
READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _NetPortAttr(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long


def abi_version() -> int:
    """The Landlock ABI this kernel offers; 0 when Landlock is absent or disabled."""
    res = _syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0),
                   ctypes.c_uint32(CREATE_RULESET_VERSION))
    return int(res) if res > 0 else 0


def fs_rights(abi: int) -> int:
    rights = _FS_ABI1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    if abi >= 5:
        rights |= FS_IOCTL_DEV
    return rights


@dataclass(frozen=True)
class LandlockPolicy:
    read_paths: tuple[str, ...] = ()
    write_paths: tuple[str, ...] = ()
    #: deny TCP bind/connect (ABI >= 4)
    deny_tcp: bool = True
    #: scope abstract Unix sockets and signals to the sandbox (ABI >= 6)
    scope: bool = True
    #: TCP ports that may still be connected to when ``deny_tcp`` (the allow-list proxy)
    connect_ports: tuple[int, ...] = ()


def _add_path(ruleset_fd: int, path: str, access: int, opened: str | None = None) -> None:
    """A rule for ``path``, opened at ``opened`` when given (the same inode under another
    name: see :meth:`Ruleset.add_paths`)."""
    try:
        fd = os.open(opened or path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path that does not exist cannot be reached either
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= FILE_RIGHTS
        attr = _PathBeneathAttr(access, fd)
        res = _syscall(SYS_ADD_RULE, ctypes.c_int(ruleset_fd), ctypes.c_int(RULE_PATH_BENEATH),
                       ctypes.byref(attr), ctypes.c_uint32(0))
        if res < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_add_rule({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


class Ruleset:
    """A ruleset being built: rules added now, enforced by :meth:`restrict_self`.

    Why a separate step: a rule names an *inode* (opened by path when it is added), so the
    rules that are the same for every execution can be added ahead, in a warm sandbox
    entry, and only the execution's own paths on the launch's critical path. ``read`` and
    ``write`` record which paths have a rule, for the caller to check against the policy it
    finally enforces. The descriptor is close-on-exec."""

    def __init__(self, *, deny_tcp: bool = True, scope: bool = True,
                 abi: int | None = None) -> None:
        self.abi = abi_version() if abi is None else abi
        if self.abi < 1:
            raise OSError(errno.EOPNOTSUPP, "Landlock is not available")
        self.deny_tcp, self.scope = deny_tcp, scope
        self.handled = fs_rights(self.abi)
        attr = _RulesetAttr(self.handled, 0, 0)
        if deny_tcp and self.abi >= 4:
            attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
        if scope and self.abi >= 6:
            attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        size = ctypes.sizeof(_RulesetAttr) if self.abi >= 6 else (16 if self.abi >= 4 else 8)
        fd = _syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                      ctypes.c_uint32(0))
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_create_ruleset: {os.strerror(err)}")
        self.fd: int | None = int(fd)
        self.read: set[str] = set()
        self.write: set[str] = set()

    def add_paths(self, paths: Iterable[str], *, write: bool,
                  opener: Callable[[str], str | None] | None = None) -> None:
        """Read (or full) access beneath each of ``paths``. ``opener(path)`` may name where
        to open ``path`` instead (the same inode, seen from before a ``pivot_root``)."""
        assert self.fd is not None, "ruleset already used"
        for path in _unique(paths):
            _add_path(self.fd, path, self.handled if write else READ,
                      opener(path) if opener is not None else None)
            (self.write if write else self.read).add(path)

    def add_ports(self, ports: Iterable[int]) -> None:
        """TCP ports that may still be connected to (``deny_tcp``; ABI >= 4)."""
        assert self.fd is not None, "ruleset already used"
        ports = list(ports)
        if not self.deny_tcp or not ports:
            return
        if self.abi < 4:
            raise OSError(errno.EOPNOTSUPP, "Landlock ABI 4 is needed to allow one port")
        for port in ports:
            net = _NetPortAttr(NET_CONNECT_TCP, port)
            if _syscall(SYS_ADD_RULE, ctypes.c_int(self.fd), ctypes.c_int(RULE_NET_PORT),
                        ctypes.byref(net), ctypes.c_uint32(0)) < 0:
                err = ctypes.get_errno()
                raise OSError(err, f"landlock_add_rule(port {port}): {os.strerror(err)}")

    def restrict_self(self) -> int:
        """Enforce the ruleset on the calling thread (and what it execs or forks), then
        close it. Needs no-new-privileges or CAP_SYS_ADMIN. Returns the ABI used."""
        assert self.fd is not None, "ruleset already used"
        try:
            if _syscall(SYS_RESTRICT_SELF, ctypes.c_int(self.fd), ctypes.c_uint32(0)) < 0:
                err = ctypes.get_errno()
                raise OSError(err, f"landlock_restrict_self: {os.strerror(err)}")
        finally:
            self.close()
        return self.abi

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def move_above(self, low: int) -> None:
        """Give the ruleset a descriptor numbered ``low`` or more (out of the way of
        descriptors about to be placed at given numbers), close-on-exec."""
        if self.fd is not None and self.fd < low:
            moved = fcntl.fcntl(self.fd, fcntl.F_DUPFD_CLOEXEC, low)
            os.close(self.fd)
            self.fd = moved


def restrict_self(policy: LandlockPolicy, abi: int | None = None,
                  ruleset: Ruleset | None = None) -> int:
    """Apply ``policy`` to the calling thread (and what it execs or forks). Needs
    no-new-privileges or CAP_SYS_ADMIN. Returns the ABI used; raises OSError on failure.

    ``ruleset``: one built ahead with some of the policy's rules (see :class:`Ruleset`).
    It is used only when it matches the policy (same TCP and scope handling, and no path
    the policy does not list); otherwise it is discarded and the policy applied from
    scratch, so a stale one can never widen what the policy allows."""
    if ruleset is not None and not (
            ruleset.fd is not None and ruleset.deny_tcp == policy.deny_tcp
            and ruleset.scope == policy.scope
            and ruleset.read <= set(policy.read_paths)
            and ruleset.write <= set(policy.write_paths)):
        ruleset.close()
        ruleset = None
    if ruleset is None:
        ruleset = Ruleset(deny_tcp=policy.deny_tcp, scope=policy.scope, abi=abi)
    try:
        ruleset.add_paths([p for p in policy.read_paths if p not in ruleset.read],
                          write=False)
        ruleset.add_paths([p for p in policy.write_paths if p not in ruleset.write],
                          write=True)
        ruleset.add_ports(policy.connect_ports)
        return ruleset.restrict_self()
    finally:
        ruleset.close()


def _unique(paths: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for p in paths:
        if p:
            seen.setdefault(p, None)
    return list(seen)
