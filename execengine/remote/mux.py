"""Talking to the OpenSSH ControlMaster directly, over its control socket.

``ssh -O forward`` costs a new ``ssh`` process per request; the master's own multiplexing
protocol (OpenSSH's ``PROTOCOL.mux``, version 4) does the same in two packets on a Unix
socket. Each message is ``uint32 length`` + ``uint32 type`` + body, strings are
``uint32 length`` + bytes; both sides start with a hello. Only what the launcher needs is
here: opening and closing a forward of a remote Unix socket to a local one.
"""

from __future__ import annotations

import socket
import struct

from execengine.errors import RemoteError

MUX_MSG_HELLO = 0x00000001
MUX_C_OPEN_FWD = 0x10000006
MUX_C_CLOSE_FWD = 0x10000007
MUX_S_OK = 0x80000001
MUX_S_PERMISSION_DENIED = 0x80000002
MUX_S_FAILURE = 0x80000003
MUX_FWD_REMOTE = 2
#: the "port" that marks a host field as a Unix socket path
PORT_STREAMLOCAL = 0xFFFFFFFE
VERSION = 4


def _string(data: str | bytes) -> bytes:
    raw = data.encode() if isinstance(data, str) else data
    return struct.pack(">I", len(raw)) + raw


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise RemoteError("the control socket closed")
        buf += chunk
    return buf


def _recv(sock: socket.socket) -> tuple[int, bytes]:
    (length,) = struct.unpack(">I", _recv_exact(sock, 4))
    if not 4 <= length <= 256 * 1024:
        raise RemoteError(f"bad packet length {length}")
    body = _recv_exact(sock, length)
    return struct.unpack(">I", body[:4])[0], body[4:]


def _send(sock: socket.socket, kind: int, body: bytes) -> None:
    payload = struct.pack(">I", kind) + body
    sock.sendall(struct.pack(">I", len(payload)) + payload)


def _reason(body: bytes) -> str:
    if len(body) >= 8:
        (n,) = struct.unpack(">I", body[4:8])
        return body[8:8 + n].decode("utf-8", "replace")
    return "no reason given"


def _forward(control_path: str, kind: int, remote_path: str, local_path: str,
             timeout: float) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(control_path)
        _send(sock, MUX_MSG_HELLO, struct.pack(">I", VERSION))
        kind_in, body = _recv(sock)
        if kind_in != MUX_MSG_HELLO or struct.unpack(">I", body[:4])[0] != VERSION:
            raise RemoteError("the master does not speak mux protocol version 4")
        request = (struct.pack(">II", 1, MUX_FWD_REMOTE) + _string(remote_path)
                   + struct.pack(">I", PORT_STREAMLOCAL) + _string(local_path)
                   + struct.pack(">I", PORT_STREAMLOCAL))
        _send(sock, kind, request)
        reply, body = _recv(sock)
        if reply == MUX_S_OK:
            return
        if reply in (MUX_S_PERMISSION_DENIED, MUX_S_FAILURE):
            raise RemoteError(_reason(body))
        raise RemoteError(f"unexpected reply 0x{reply:08x}")


def open_remote_forward(control_path: str, remote_path: str, local_path: str, *,
                        timeout: float = 30.0) -> None:
    """Make ``remote_path`` on the remote a socket forwarded to ``local_path`` here; returns
    once the remote has confirmed it (the socket exists there)."""
    _forward(control_path, MUX_C_OPEN_FWD, remote_path, local_path, timeout)


def close_remote_forward(control_path: str, remote_path: str, local_path: str, *,
                         timeout: float = 30.0) -> None:
    _forward(control_path, MUX_C_CLOSE_FWD, remote_path, local_path, timeout)
