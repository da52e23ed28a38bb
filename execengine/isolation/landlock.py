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
import os
from collections.abc import Iterable
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


def _add_path(ruleset_fd: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path that does not exist cannot be reached either
    try:
        if not os.path.isdir(path):
            access &= FILE_RIGHTS
        attr = _PathBeneathAttr(access, fd)
        res = _syscall(SYS_ADD_RULE, ctypes.c_int(ruleset_fd), ctypes.c_int(RULE_PATH_BENEATH),
                       ctypes.byref(attr), ctypes.c_uint32(0))
        if res < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_add_rule({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


def restrict_self(policy: LandlockPolicy, abi: int | None = None) -> int:
    """Apply ``policy`` to the calling thread (and what it execs or forks). Needs
    no-new-privileges or CAP_SYS_ADMIN. Returns the ABI used; raises OSError on failure."""
    abi = abi_version() if abi is None else abi
    if abi < 1:
        raise OSError(errno.EOPNOTSUPP, "Landlock is not available")
    handled = fs_rights(abi)
    attr = _RulesetAttr(handled, 0, 0)
    if policy.deny_tcp and abi >= 4:
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
    if policy.scope and abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    fd = _syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                  ctypes.c_uint32(0))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock_create_ruleset: {os.strerror(err)}")
    fd = int(fd)
    try:
        for path in _unique(policy.read_paths):
            _add_path(fd, path, READ)
        for path in _unique(policy.write_paths):
            _add_path(fd, path, handled)
        if policy.deny_tcp and policy.connect_ports:
            if abi < 4:
                raise OSError(errno.EOPNOTSUPP, "Landlock ABI 4 is needed to allow one port")
            for port in policy.connect_ports:
                net = _NetPortAttr(NET_CONNECT_TCP, port)
                if _syscall(SYS_ADD_RULE, ctypes.c_int(fd), ctypes.c_int(RULE_NET_PORT),
                            ctypes.byref(net), ctypes.c_uint32(0)) < 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"landlock_add_rule(port {port}): {os.strerror(err)}")
        if _syscall(SYS_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)) < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_restrict_self: {os.strerror(err)}")
    finally:
        os.close(fd)
    return abi


def _unique(paths: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for p in paths:
        if p:
            seen.setdefault(p, None)
    return list(seen)
