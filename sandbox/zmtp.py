"""A small ZMTP 3.0/3.1 client (RFC 23, RFC 37) over a Unix-domain stream socket.

Only what the child needs to talk to the host's ``ROUTER`` socket: the greeting (NULL
mechanism, as-server = 0), the ``READY`` handshake as a ``DEALER`` without an ``Identity``,
short and long frames, multi-frame messages, ``PING`` answered with ``PONG`` (context echoed,
TTL honoured as a receive deadline) and the ``ERROR`` command.

Threading model: one thread at a time receives (:meth:`ZmtpConnection.recv`), any number of threads
send (:meth:`ZmtpConnection.send`, serialised by a lock); :meth:`ZmtpConnection.close` may be
called from any thread and wakes a blocked receiver.

Errors::

    ZmtpError            protocol violation or unusable peer
     +-- PeerClosed      the peer went away (EOF, reset, heartbeat TTL expired, closed by us)
     +-- PeerError       the peer sent an ERROR command
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
import time
from functools import reduce
from operator import iadd

TYPE_CHECKING = False  # no typing import at run time: the child starts fast
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["PeerClosed", "PeerError", "ZmtpConnection", "ZmtpError", "connect"]

FLAG_MORE = 0x01
FLAG_LONG = 0x02
FLAG_COMMAND = 0x04
_RESERVED = 0xF8

#: signature (10) + version (2) + mechanism (20) + as-server (1) + filler (31)
GREETING_SIZE = 64
#: libzmq sends 0xFF, eight padding bytes, 0x7F; the padding is not significant
GREETING = (b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x01" + b"NULL".ljust(20, b"\x00")
            + b"\x00" + b"\x00" * 31)

#: socket types a DEALER may talk to (RFC 28)
_COMPATIBLE_PEERS = (b"ROUTER", b"DEALER", b"REP")
DEFAULT_MAX_FRAME = 1 << 30
_CHUNK = 1 << 16
#: the most one read asks for while a large frame's body is still missing
_BIG = 1 << 22
#: nothing queued to send
_NOTHING: tuple[tuple[bytes, ...], list[int]] = ((), [])


class ZmtpError(Exception):
    """A ZMTP protocol violation or an unusable peer."""


class PeerClosed(ZmtpError):
    """The peer went away; no more messages will arrive or can be sent."""


class PeerError(ZmtpError):
    """The peer sent an ERROR command (its reason is the message)."""


def encode_frame(body: bytes, flags: int = 0) -> bytes:
    """The header of one frame followed by ``body`` (short or long size, as needed)."""
    return _frame_header(len(body), flags) + body


def _frame_header(size: int, flags: int) -> bytes:
    if size <= 255:
        return bytes((flags, size))
    return struct.pack("!BQ", flags | FLAG_LONG, size)


def encode_command(name: bytes, data: bytes = b"") -> bytes:
    """A command frame: name-size, name, command data."""
    if not 0 < len(name) <= 255:
        raise ValueError("a command name is 1 to 255 bytes")
    return encode_frame(bytes([len(name)]) + name + data, FLAG_COMMAND)


def encode_properties(props: dict[bytes, bytes]) -> bytes:
    """Metadata as in READY: 1-byte name size, name, 4-byte value size, value."""
    out = []
    for name, value in props.items():
        out.append(bytes([len(name)]) + name + struct.pack("!I", len(value)) + value)
    return b"".join(out)


def decode_properties(data: bytes) -> dict[bytes, bytes]:
    """The inverse of :func:`encode_properties`; names are case-insensitive (lower-cased)."""
    props = {}
    pos = 0
    while pos < len(data):
        size = data[pos]
        pos += 1
        name = data[pos:pos + size]
        if len(name) != size or pos + size + 4 > len(data):
            raise ZmtpError("malformed metadata in command")
        pos += size
        (vsize,) = struct.unpack_from("!I", data, pos)
        pos += 4
        value = data[pos:pos + vsize]
        if len(value) != vsize:
            raise ZmtpError("malformed metadata value in command")
        pos += vsize
        props[name.lower()] = value
    return props


def split_command(body: bytes) -> tuple[bytes, bytes]:
    """``(name, data)`` of a command frame's body."""
    if not body or len(body) < 1 + body[0]:
        raise ZmtpError("malformed command frame")
    return body[1:1 + body[0]], body[1 + body[0]:]


class ZmtpConnection:
    """One ZMTP connection on a connected stream socket; see the module docstring.

    Build it with :func:`connect`. Use it as a context manager or call :meth:`close`
    (idempotent).
    """

    def __init__(self, sock: socket.socket, *, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self._sock = sock
        self._max_frame = max_frame
        self._buf = bytearray()
        # reentrant: a signal handler that interrupts this thread's own send is told so
        # (it owns the lock, see _send_locked) instead of deadlocking on it
        self._send_lock = threading.RLock()
        #: what is being sent and the byte counts sent of it so far (see _sendall)
        self._out = _NOTHING
        self._closed = False
        self._close_reason = "connection closed"
        #: negotiated minor version (0 = ZMTP 3.0, 1 = ZMTP 3.1)
        self.minor = 0
        #: the peer's READY metadata (lower-case names)
        self.peer_properties: dict[bytes, bytes] = {}
        self._ttl = None  # type: float | None
        self._timeout = None  # type: float | None
        #: PING commands answered so far
        self.pings = 0
        self._poller = None  # type: select.poll | None

    # -- set-up ---------------------------------------------------------------------------

    def handshake(self, timeout: float | None = None) -> None:
        """Exchange greetings and READY commands; raise :class:`ZmtpError` on failure."""
        self._sock.settimeout(timeout)
        try:
            self._sendall(GREETING)
            greeting = self._read_exact(GREETING_SIZE)
            if greeting[0] != 0xFF or not greeting[9] & 0x01:
                raise ZmtpError("peer does not speak ZMTP (bad greeting signature)")
            major, minor = greeting[10], greeting[11]
            if major < 3:
                raise ZmtpError(f"peer speaks ZMTP {major}.{minor}; 3.x is required")
            self.minor = 1 if major > 3 or minor >= 1 else 0
            mechanism = bytes(greeting[12:32]).rstrip(b"\x00")
            if mechanism != b"NULL":
                wanted = mechanism.decode("ascii", "replace")
                raise ZmtpError(f"peer wants security mechanism {wanted!r}; only NULL is "
                                "supported")
            self._sendall(encode_command(b"READY", encode_properties({b"Socket-Type": b"DEALER"})))
            flags, body = self._read_frame()
            if not flags & FLAG_COMMAND:
                raise ZmtpError("peer sent a message before READY")
            name, data = split_command(body)
            if name == b"ERROR":
                raise PeerError(_error_reason(data))
            if name != b"READY":
                raise ZmtpError(f"expected READY, peer sent {name!r}")
            self.peer_properties = decode_properties(data)
            peer_type = self.peer_properties.get(b"socket-type", b"")
            if peer_type not in _COMPATIBLE_PEERS:
                raise ZmtpError(f"a DEALER cannot talk to a {peer_type!r} socket")
        except socket.timeout:
            raise ZmtpError("ZMTP handshake timed out") from None
        except PeerClosed as exc:
            if isinstance(exc.__cause__, socket.timeout):
                raise ZmtpError("ZMTP handshake timed out") from None
            raise
        finally:
            if not self._closed:
                with contextlib.suppress(OSError):
                    self._sock.settimeout(None)

    # -- sending --------------------------------------------------------------------------

    def send(self, *frames: bytes) -> None:
        """Send one message made of ``frames`` (at least one). Thread-safe."""
        if len(frames) == 1 and len(frames[0]) <= _CHUNK:  # the common case: one copy
            self._send_locked(encode_frame(frames[0]))
            return
        if not frames:
            raise ValueError("a message has at least one frame")
        last = len(frames) - 1
        parts: list[bytes] = []
        for i, frame in enumerate(frames):
            parts.append(_frame_header(len(frame), FLAG_MORE if i < last else 0))
            parts.append(frame)
        self._send_locked(tuple(parts))

    def _send_command(self, name: bytes, data: bytes = b"") -> None:
        self._send_locked(encode_command(name, data))

    def ping(self) -> None:
        """Send a PING (TTL 0): the peer's PONG makes a reader blocked in :meth:`peek`
        look at the buffer again (see :meth:`peek_at`)."""
        self._send_command(b"PING", b"\x00\x00")

    def _send_locked(self, data: bytes | tuple[bytes, ...]) -> None:
        if self._send_lock._is_owned():  # type: ignore[attr-defined]
            # a signal handler, in this thread's own send: its frames would tear those
            # under way (the lock's owner is the only state: nothing to leave set behind)
            raise ZmtpError("cannot send from a signal handler that interrupted a send "
                            "on the same connection")
        with self._send_lock:
            self._sendall(data)

    def _sendall(self, data: bytes | tuple[bytes, ...]) -> None:
        """Send ``data`` (bytes, or a tuple of them sent back to back) whole; the send
        lock is held.

        A signal handler may raise part way (the caller's alarm, a ``KeyboardInterrupt``).
        The rest then stays queued, and the next send delivers it first: the peer never
        sees a torn frame. That needs each step's progress stored before any bytecode
        runs, where the handler could raise: the byte count ``socket.send`` returns goes
        straight into a list by ``list.extend(map(...))``, all in C."""
        if self._closed:
            raise PeerClosed(self._close_reason)
        try:
            if self._out is not _NOTHING:
                self._drain()  # what an interrupted send left
            self._out = ((data,) if isinstance(data, bytes) else data, [])
            self._drain()
            self._out = _NOTHING
        except OSError as exc:
            # a partly sent frame leaves the stream unusable: the connection is over
            reason = ("timed out sending to the peer" if isinstance(exc, socket.timeout)
                      else f"connection lost while sending: {exc}")
            self._shutdown(reason)
            raise PeerClosed(reason) from exc

    def _drain(self) -> None:
        parts, sent = self._out
        done = sum(sent)  # bytes of ``parts`` already sent
        send = self._sock.send
        for part in parts:
            size = len(part)
            if done >= size:
                done -= size
                continue
            if not done:
                sent.extend(map(send, (part,)))
                done = sent[-1]
            if done < size:
                with memoryview(part) as view:
                    while done < size:
                        sent.extend(map(send, (view[done:],)))
                        done += sent[-1]
            done = 0

    # -- receiving ------------------------------------------------------------------------

    def recv(self) -> list[bytes]:
        """The next message as a list of frames, taken out of the buffer; answers PINGs on
        the way. One reader at a time. Interrupted (a signal handler raising, a timeout),
        it leaves the stream intact: what was read stays buffered for the next call (at
        worst the message just taken out is lost whole; :meth:`peek` and :meth:`consume`
        lose nothing)."""
        found = self.peek()
        assert found is not None  # without ``idle``, peek waits for a message
        del self._buf[:found[1]]
        return found[0]

    def has_frame(self) -> bool:
        """A whole frame is buffered: the next :meth:`recv` starts without waiting."""
        try:
            return isinstance(self._frame_at(0), tuple)
        except ZmtpError:
            return True  # a malformed header: the next recv raises at once

    def spin(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for bytes to read without sleeping (polling the socket
        in a loop); True once there are. Nothing is read: a reply that comes this soon is
        read without the scheduler's wake-up, which costs more than the reply on a busy
        machine. For short waits only: the thread keeps its core meanwhile."""
        poller = self._poller
        if poller is None:
            poller = self._poller = select.poll()
            poller.register(self._sock.fileno(), select.POLLIN)
        poll, clock = poller.poll, time.perf_counter
        until = clock() + seconds
        while not poll(0):
            if clock() >= until:
                return False
        return True

    def peek(self, idle: bool = False) -> tuple[list[bytes], int] | None:
        """The next message and its size in the buffer, *left* there until
        :meth:`consume` (None with ``idle`` once a command came between messages).

        A signal handler may raise at any bytecode. So the buffer is the only state: a
        message leaves it only when the caller has handed it on (``consume``, one
        ``del``), and a command only once it was handled. An interruption never drops a
        message nor joins one to the next; at worst the caller sees it again (and a PING
        is answered twice)."""
        buf = self._buf
        while True:
            spans: list[tuple[int, int]] = []  # (start, end) of the message's frames found so far
            pos = 0
            while True:
                frame = self._frame_at(pos)
                if not isinstance(frame, tuple):  # more bytes needed
                    self._pull(frame)
                    break  # and look again from the start
                flags, start, end = frame
                if flags & FLAG_COMMAND:
                    self._on_command(flags, bytes(buf[start:end]))
                    del buf[pos:end]
                    if idle and not spans:
                        return None
                    continue
                spans.append((start, end))
                pos = end
                if not flags & FLAG_MORE:
                    return [bytes(buf[a:b]) for a, b in spans], pos

    def peek_at(self, pos: int) -> tuple[list[bytes], int] | int:
        """The whole message buffered at ``pos`` and where the next one starts; else how
        many bytes :meth:`pull` should read for more. Command frames are stepped over and
        stay buffered (the next :meth:`peek` handles them).

        For a reader nested in a signal handler that interrupted this thread's own
        :meth:`peek`: it removes nothing, and :meth:`pull` only appends, so the
        interrupted reader's offsets stay valid and it finds the same messages again
        (handing one on twice is a no-op for its caller)."""
        spans: list[tuple[int, int]] = []
        while True:
            frame = self._frame_at(pos)
            if not isinstance(frame, tuple):
                return frame
            flags, start, end = frame
            pos = end
            if flags & FLAG_COMMAND:
                continue
            spans.append((start, end))
            if not flags & FLAG_MORE:
                return [bytes(self._buf[a:b]) for a, b in spans], pos

    def pull(self, size: int) -> None:
        """Append what the socket has (up to ``size`` bytes, waiting for at least one)."""
        self._pull(size)

    def consume(self, size: int) -> None:
        """Drop the message :meth:`peek` returned (its ``size``)."""
        del self._buf[:size]

    def _frame_at(self, pos: int) -> tuple[int, int, int] | int:
        """``(flags, body start, body end)`` of the whole frame buffered at ``pos``; else
        how many bytes to read for more of it."""
        buf = self._buf
        have = len(buf) - pos
        if have < 2:
            return _CHUNK
        flags = buf[pos]
        if flags & _RESERVED:
            raise ZmtpError(f"frame with reserved flag bits set (0x{flags:02x})")
        if flags & FLAG_LONG:
            if have < 9:
                return _CHUNK
            size: int = struct.unpack_from("!Q", buf, pos + 1)[0]
            start = pos + 9
        else:
            size, start = buf[pos + 1], pos + 2
        if size > self._max_frame:
            raise ZmtpError(f"frame of {size} bytes exceeds the limit of {self._max_frame}")
        end = start + size
        if end > len(buf):
            return min(max(end - len(buf), _CHUNK), _BIG)
        return flags, start, end

    def _on_command(self, flags: int, body: bytes) -> None:
        if flags & FLAG_MORE:
            raise ZmtpError("command frame with the MORE flag")
        name, data = split_command(body)
        if name == b"PING":
            if len(data) < 2:
                raise ZmtpError("malformed PING command")
            (ttl,) = struct.unpack_from("!H", data)
            context = data[2:18]
            # TTL (deciseconds): the peer stops considering us alive after it; we treat
            # silence longer than it as a dead peer, so a vanished host never blocks us.
            self._ttl = ttl / 10.0 if ttl else None
            self._send_command(b"PONG", context)
            self.pings += 1
        elif name == b"PONG":
            pass
        elif name == b"ERROR":
            reason = _error_reason(data)
            self._shutdown(f"peer sent ERROR: {reason}")
            raise PeerError(reason)
        else:
            # RFC 37: unknown commands are ignored (forward compatibility)
            pass

    def _read_frame(self) -> tuple[int, bytes]:
        """One whole frame ``(flags, body)`` (the handshake's READY). Nothing is consumed
        from the buffer until the frame is complete, so an interrupted read loses nothing."""
        while True:
            frame = self._frame_at(0)
            if isinstance(frame, tuple):
                flags, start, end = frame
                body = bytes(self._buf[start:end])
                del self._buf[:end]
                return flags, body
            self._pull(frame)

    def _read_exact(self, n: int) -> bytes:
        """Exactly ``n`` bytes (the greeting), however the peer splits them."""
        buf = self._buf
        while len(buf) < n:
            self._pull(_CHUNK)
        out = bytes(buf[:n])
        del buf[:n]
        return out

    def _pull(self, size: int) -> None:
        """Append what the socket has (at most ``size`` bytes, waiting for at least one)
        to the buffer.

        A signal handler runs, and may raise, at the first bytecode after a call returns.
        ``buf += sock.recv(size)`` would lose the chunk then: it is received but not yet
        stored. Here ``functools.reduce`` appends it with ``operator.iadd``, all in C, so
        what the socket gave is in the buffer before any bytecode runs."""
        buf = self._buf
        have = len(buf)
        self._recv_op(lambda: reduce(iadd, map(self._sock.recv, (size,)), buf))
        if len(buf) == have:
            raise PeerClosed("peer closed the connection" if not self._closed
                             else self._close_reason)

    def _recv_op(self, op: Callable[[], Any]) -> Any:
        if self._closed:
            raise PeerClosed(self._close_reason)
        ttl = self._ttl
        if ttl != self._timeout:
            self._sock.settimeout(ttl)
            self._timeout = ttl
        try:
            return op()
        except socket.timeout:
            if ttl is None:
                raise
            self._shutdown(f"no traffic from the peer within its heartbeat TTL ({ttl:.1f} s)")
            raise PeerClosed(self._close_reason) from None
        except OSError as exc:
            if self._closed:
                raise PeerClosed(self._close_reason) from None
            raise PeerClosed(f"connection lost while receiving: {exc}") from exc

    # -- closing --------------------------------------------------------------------------

    def _shutdown(self, reason: str) -> None:
        if self._closed:
            return
        self._closed = True
        self._close_reason = reason
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def shutdown(self, reason: str) -> None:
        """End the connection but keep the descriptor (a read suspended by a signal
        handler is about to use it again: it gets EOF, :class:`PeerClosed`)."""
        self._shutdown(reason)

    def close(self) -> None:
        """Close the connection; a thread blocked in :meth:`recv` gets :class:`PeerClosed`."""
        self._shutdown("connection closed")
        self._sock.close()

    def abandon(self) -> None:
        """Drop the socket without shutting the connection down (after ``fork``, in the
        child: the parent still uses the same connection)."""
        self._closed = True
        self._close_reason = "connection belongs to the parent process"
        self._sock.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> ZmtpConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _error_reason(data: bytes) -> str:
    if not data:
        return "(no reason given)"
    return bytes(data[1:1 + data[0]]).decode("utf-8", "replace")


def connect(path: str, *, timeout: float | None = 10.0,
            max_frame: int = DEFAULT_MAX_FRAME) -> ZmtpConnection:
    """Connect to the socket file at ``path`` and complete the ZMTP handshake within
    ``timeout`` seconds. Raise :class:`ZmtpError` (or :class:`PeerClosed`) on failure."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.001
        while True:
            try:
                sock.connect(path)
                break
            except socket.timeout:
                raise ZmtpError(f"connecting to {path} timed out") from None
            except BlockingIOError:
                # the listener's backlog is full (a Unix socket with a timeout says EAGAIN
                # rather than waiting): try again until the deadline
                if deadline is not None and time.monotonic() + delay > deadline:
                    raise ZmtpError(f"connecting to {path} timed out (backlog full)") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
            except OSError as exc:
                raise PeerClosed(f"cannot connect to {path}: {exc.strerror or exc}") from exc
        conn = ZmtpConnection(sock, max_frame=max_frame)
        conn.handshake(timeout)
        return conn
    except BaseException:
        sock.close()
        raise
