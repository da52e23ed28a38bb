"""The seccomp filter applied last before the sandboxed interpreter starts.

Why pyseccomp: a seccomp filter is BPF over *architecture-specific* syscall numbers, with
an architecture check up front and argument comparisons for ``socket`` and ``clone``.
libseccomp (``libseccomp2``, present on every Debian/Ubuntu system because apt and systemd
depend on it) resolves names per architecture and generates correct BPF; writing that by
hand is where sandboxes get subtly wrong. Debian's ``python3-seccomp`` binding exists only
for Debian's own interpreter, not for a venv or pyenv Python, so it cannot be a dependency.
``pyseccomp`` is a small pure-ctypes binding with the same API, installable from PyPI by the
project's own install step. When it (or libseccomp) is missing the layer reports itself
unavailable and the level is downgraded or refused (``min_isolation``).

The filter is a deny-list (default allow) because the workload is arbitrary Python with
native extensions: an allow-list would break legitimate programs in ways we cannot test.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import socket
import tempfile
from typing import Any

#: denied outright with EPERM: kernel attack surface and escape helpers
DENIED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
    "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    "open_by_handle_at", "name_to_handle_at",
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "syslog",
    "iopl", "ioperm", "vhangup", "lookup_dcookie", "nfsservctl",
    "fanotify_init",
)
#: clone() flags that create namespaces
NAMESPACE_FLAGS = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
    | 0x00000080  # CLONE_NEWTIME
)
TIOCSTI = 0x5412
#: the mode bits no file written by a sandbox may carry: a set-user-ID or set-group-ID
#: file the sandbox leaves in a host folder would run with its owner's ids there
PRIVILEGE_BITS = (0o4000, 0o2000)  # S_ISUID, S_ISGID
#: (syscall, index of its mode argument): every way to set a mode on a new or existing file
MODE_ARGUMENT: tuple[tuple[str | int, int], ...] = (
    ("chmod", 1), ("fchmod", 1), ("fchmodat", 2), (452, 2),  # 452: fchmodat2
    ("open", 2), ("openat", 3), ("creat", 1), ("mknod", 1), ("mknodat", 2),
    ("mkdir", 1), ("mkdirat", 2))


def load_module() -> Any:
    """Import pyseccomp; raises ImportError/OSError when it or libseccomp is missing."""
    import pyseccomp

    return pyseccomp


#: socket types other than SOCK_STREAM (dgram, raw, rdm, seqpacket, dccp, packet)
NON_STREAM_TYPES = (2, 3, 4, 5, 6, 10)
#: SCTP, SMC, MPTCP
OTHER_STREAM_PROTOCOLS = (132, 256, 262)
#: MSG_FASTOPEN: a send that connects (a connect a Landlock port rule would not see)
MSG_FASTOPEN = 0x20000000


def build_filter(allow_network: bool = False, stream_only: bool = False) -> Any:
    """The filter object (not loaded). ``allow_network`` permits non-Unix sockets;
    ``stream_only`` (the allow-list proxy in the host's network namespace) permits only
    Unix and stream sockets, whose connects Landlock confines to the proxy's port: no UDP,
    no raw sockets, no TCP fast open, and no ``listen`` (an unbound socket that listens
    gets an ephemeral port on every host address, which Landlock's bind rule does not
    see: a way *in*; the filter cannot tell a Unix socket's listen from it, so both are
    refused)."""
    sc = load_module()
    flt = sc.SyscallFilter(sc.ALLOW)
    eperm = sc.ERRNO(errno.EPERM)
    for name in DENIED:
        _rule(sc, flt, eperm, name)
    # clone3 passes its flags in memory a filter cannot read: make glibc fall back to clone
    _rule(sc, flt, sc.ERRNO(errno.ENOSYS), "clone3")
    for flag in _bits(NAMESPACE_FLAGS):
        _rule(sc, flt, eperm, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    _rule(sc, flt, eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, TIOCSTI))
    # no setuid/setgid plant: refuse those mode bits wherever a mode is given (openat2's
    # mode sits in a struct a filter cannot read: ENOSYS, and libc falls back to openat)
    for call, index in MODE_ARGUMENT:
        for bit in PRIVILEGE_BITS:
            _rule(sc, flt, eperm, call, sc.Arg(index, sc.MASKED_EQ, bit, bit))
    _rule(sc, flt, sc.ERRNO(errno.ENOSYS), "openat2")
    if stream_only and not allow_network:
        refuse = sc.ERRNO(errno.EAFNOSUPPORT)
        for family in (socket.AF_INET, socket.AF_INET6):
            # the type's low bits (SOCK_NONBLOCK / SOCK_CLOEXEC are flags above them)
            for kind in NON_STREAM_TYPES:
                _rule(sc, flt, refuse, "socket", sc.Arg(0, sc.EQ, family),
                      sc.Arg(1, sc.MASKED_EQ, 0xF, kind))
            # stream protocols Landlock's TCP rules do not cover
            for proto in OTHER_STREAM_PROTOCOLS:
                _rule(sc, flt, refuse, "socket", sc.Arg(0, sc.EQ, family),
                      sc.Arg(2, sc.EQ, proto))
        for other in _other_families():
            _rule(sc, flt, refuse, "socket", sc.Arg(0, sc.EQ, other))
        _rule(sc, flt, eperm, "sendto", sc.Arg(3, sc.MASKED_EQ, MSG_FASTOPEN, MSG_FASTOPEN))
        _rule(sc, flt, eperm, "sendmsg", sc.Arg(2, sc.MASKED_EQ, MSG_FASTOPEN, MSG_FASTOPEN))
        _rule(sc, flt, eperm, "setsockopt", sc.Arg(1, sc.EQ, socket.IPPROTO_TCP),
              sc.Arg(2, sc.EQ, 30))  # TCP_FASTOPEN_CONNECT
        _rule(sc, flt, eperm, "listen")
    elif not allow_network:
        _rule(sc, flt, sc.ERRNO(errno.EAFNOSUPPORT), "socket",
              sc.Arg(0, sc.NE, socket.AF_UNIX))
    return flt


def _other_families() -> list[int]:
    """Address families other than Unix, IPv4 and IPv6 (netlink, packet, vsock, ...)."""
    return [f for f in range(1, 46) if f not in (socket.AF_UNIX, socket.AF_INET,
                                                 socket.AF_INET6)]


def apply(allow_network: bool = False, stream_only: bool = False) -> None:
    """Build and load the filter into the calling thread (sets no-new-privileges)."""
    build_filter(allow_network, stream_only).load()


@functools.lru_cache(maxsize=4)
def compiled(allow_network: bool = False, stream_only: bool = False) -> bytes:
    """The filter as raw BPF (``struct sock_filter`` array), built once per process.

    The spawner compiles both variants at start-up; a sandboxed child then only loads the
    bytes (:func:`load_bpf`, about 0.05 ms) instead of building the filter through
    libseccomp between fork and exec (about 1 ms there, on every launch)."""
    with tempfile.TemporaryFile() as fh:
        build_filter(allow_network, stream_only).export_bpf(fh)
        fh.seek(0)
        return fh.read()


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
_libc = ctypes.CDLL(None, use_errno=True)


def load_bpf(program: bytes) -> None:
    """Install a program from :func:`compiled` on the calling thread. The caller must
    have set no-new-privileges (or hold CAP_SYS_ADMIN)."""
    if not program or len(program) % 8:
        raise OSError(errno.EINVAL, "seccomp: empty or malformed BPF program")
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp: {os.strerror(err)}")


def _bits(mask: int) -> list[int]:
    return [1 << i for i in range(mask.bit_length()) if mask & (1 << i)]


def _rule(sc: Any, flt: Any, action: int, name: str | int, *args: Any) -> None:
    # a syscall missing on this architecture or libseccomp version is simply skipped
    with contextlib.suppress(ValueError, OSError, RuntimeError):
        flt.add_rule(action, name, *args)
