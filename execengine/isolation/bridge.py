"""The allow-list proxy inside a sandbox's own network namespace.

A fresh network namespace has only a loopback interface, down. For ``policy.network:
allowlist`` the workload's entry (:mod:`.entry`, still root in the namespace) brings the
loopback up and starts a tiny bridge: it listens on ``127.0.0.1:<port>`` *inside* the
namespace and relays every connection to the host's proxy through its Unix socket (bound
into the sandbox's root, granted to the slot uid). ``HTTP(S)_PROXY`` point at that port.
Nothing else is reachable: the namespace has no other interface, so the proxy's socket is
the only way out.

``restricted`` gets the same (a network namespace of the entry's own, :func:`.entry.
own_network`): Landlock's TCP rule names a port on every address, so without the namespace
a script could reach any host listening on the proxy's port number.

The bridge drops to the slot uid with no-new-privileges. At ``isolated`` it is
double-forked, so the namespace's init is its parent and kills it with everything else
when the workload ends; at ``restricted`` it is the workload's child and dies with it.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import signal
import socket
import struct
import threading

SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1
CHUNK = 65536


def loopback_up() -> None:
    """Bring ``lo`` up in the current network namespace (needs CAP_NET_ADMIN there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, req)[:18])[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | IFF_UP, b""))


def start(port: int, socket_path: str, uid: int | None, gid: int | None,
          orphan: bool = True) -> None:
    """Listen on ``127.0.0.1:port`` and serve the bridge from another process (returns in
    the caller at once; the caller is the workload, about to exec). ``orphan``: double-fork
    it (``isolated``: the namespace's init is then its parent and kills it with everything
    else); otherwise it is the workload's child and dies with it (``PR_SET_PDEATHSIG``:
    ``restricted`` has no init of its own)."""
    listener = socket.create_server(("127.0.0.1", port), backlog=64)
    parent = os.getpid()
    first = os.fork()
    if first == 0:
        try:
            if not orphan:
                _serve_forever(listener, socket_path, uid, gid, parent)
            if os.fork() == 0:
                _serve_forever(listener, socket_path, uid, gid)
        finally:
            os._exit(0)
    listener.close()
    if orphan:
        os.waitpid(first, 0)


def _serve_forever(listener: socket.socket, path: str, uid: int | None,
                   gid: int | None, parent: int | None = None) -> None:
    """``parent``: die with that process (set after the uid change, which clears it)."""
    try:
        keep = listener.fileno()
        os.closerange(0, keep)
        os.closerange(keep + 1, 1 << 16)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGPIPE, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        if uid is not None and gid is not None:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        if parent is not None:
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:
                return
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=_pair, args=(conn, path), daemon=True).start()
    finally:
        os._exit(0)


def _pair(conn: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        upstream.close()
        conn.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, conn), daemon=True)
    back.start()
    _pump(conn, upstream)
    back.join()
    for s in (conn, upstream):
        with contextlib.suppress(OSError):
            s.close()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)
