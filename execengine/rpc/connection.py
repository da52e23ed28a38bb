"""One accepted peer connection: its socket, decoder, output queue and backpressure.

Only the loop thread reads; any thread may :meth:`Connection.send` (a worker sends its
call's reply itself, straight into the socket when nothing is queued: no hop through the
loop). What the socket does not take at once is queued, in order, and written by the loop
when the socket becomes writable. A reply is never dropped while the peer is connected.

Backpressure instead of loss: when more than :data:`OUT_HIGH` bytes wait for a peer that
does not read (each queued reply counted with its :data:`ENTRY_COST`), the loop stops
reading *from that peer* (its further calls stay in its own socket buffer) until the queue
is below :data:`OUT_LOW`. Other peers are not affected. The bounds are an execution's, shared
by its open connections: with ``n`` of them each may queue ``OUT_HIGH / n``, so a script
that opens its maximum of connections and reads none holds no more host memory than one.

All changes of the epoll interest mask and the close happen under the connection's lock,
so a worker never writes to a closed (possibly reused) file descriptor.

The host's side of ZMTP 3.x (RFC 23, RFC 37): an incremental, non-blocking frame codec.

The host plays a ``ROUTER`` with the NULL mechanism: it sends its whole greeting and its
``READY`` at once, accepts a ``DEALER`` peer (no identity is taken from the peer: the
connection object *is* the identity), answers ``PING`` with ``PONG`` and ignores unknown
commands. :class:`Decoder` is fed whatever ``recv`` returned and yields complete messages;
every size is checked against the limit *before* the body is buffered, so a peer cannot
make the host hold more than one frame's worth of its bytes.

The codec touches no socket: it is tested with byte strings.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
from collections import deque
from collections.abc import Generator
from typing import TYPE_CHECKING, NamedTuple

from execengine.errors import ProtocolViolation

if TYPE_CHECKING:
    from execengine.rpc.channel import Channel

#: stop reading from a peer with this many reply bytes queued (it does not read)
OUT_HIGH = 64 * 1024 * 1024
#: ... and read again once the queue is below this
OUT_LOW = 16 * 1024 * 1024
#: what one queued reply costs beyond its bytes (the object, its view, the deque slot):
#: counted with them, so a flood of tiny replies (a PONG per PING from a peer that does
#: not read) meets the bound at its real memory, not at 50x it
ENTRY_COST = 256
#: bytes read per readiness event (then the loop looks at other peers: fairness)
READ_CHUNK = 256 * 1024

IN = select.EPOLLIN
OUT = select.EPOLLOUT


class Connection:
    def __init__(self, sock: socket.socket, channel: Channel, epoll: select.epoll,
                 max_frame: int) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.channel = channel
        self.decoder = Decoder(max_frame)
        self.authed: bool | None = None  # None: no hello yet; False: denied
        self.uid: int | None = None  # the peer's, from SO_PEERCRED at accept
        self._epoll = epoll
        self._lock = threading.Lock()
        self._out: deque[memoryview] = deque()
        self._out_bytes = 0
        self._reading = True
        self.closed = False

    # -- any thread --------------------------------------------------------------------

    def send(self, data: bytes) -> bool:
        """Queue one frame-encoded message; False when the connection is closed."""
        with self._lock:
            if self.closed:
                return False
            if not self._out:
                try:
                    sent = self.sock.send(data)
                except (BlockingIOError, InterruptedError):
                    sent = 0
                except OSError:  # the peer is gone; the loop sees the hang-up and closes
                    return False
                if sent == len(data):
                    return True
                view = memoryview(data)[sent:]
            else:
                view = memoryview(data)
            was_empty = not self._out
            self._out.append(view)
            self._out_bytes += len(view) + ENTRY_COST
            if self._reading and self._out_bytes > OUT_HIGH // self._sharers():
                self._reading = False
            if was_empty or not self._reading:
                self._rearm()
            return True

    def reply(self, payload: bytes) -> bool:
        """Send one single-frame application message."""
        return self.send(frame(payload))

    @property
    def reading(self) -> bool:
        return self._reading

    @property
    def queued_bytes(self) -> int:
        with self._lock:
            return self._out_bytes

    # -- loop thread -------------------------------------------------------------------

    def recv_into(self, buf: memoryview) -> int | None:
        """Read what the socket has into ``buf`` (the loop's, reused for every read: a
        fresh 256 KiB ``bytes`` per read can be a mapping made and unmapped each time,
        by the allocator's state: 20 µs per read in a fresh process here); the count, 0 at
        EOF or once closed, None when nothing is ready. Under the lock, so a close from
        another thread never races a read."""
        with self._lock:
            if self.closed:
                return 0
            try:
                return self.sock.recv_into(buf)
            except (BlockingIOError, InterruptedError):
                return None
            except OSError:
                return 0

    def flush(self) -> None:
        """Write what is queued (the socket is writable)."""
        with self._lock:
            while self._out and not self.closed:
                head = self._out[0]
                try:
                    sent = self.sock.send(head)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    self._out.clear()
                    self._out_bytes = 0
                    break
                self._out_bytes -= sent
                if sent == len(head):
                    self._out.popleft()
                    self._out_bytes -= ENTRY_COST
                else:
                    self._out[0] = head[sent:]
                    break
            if not self._reading and (not self._out
                                      or self._out_bytes < OUT_LOW // self._sharers()):
                self._reading = True
            self._rearm()

    def close(self) -> None:
        """Unregister and close the socket (idempotent); queued output is discarded."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._out.clear()
            self._out_bytes = 0
            with contextlib.suppress(OSError, ValueError):
                self._epoll.unregister(self.fd)
            self.sock.close()

    def _sharers(self) -> int:
        """How many connections share the execution's reply bound now (at least 1)."""
        return max(1, self.channel.peers)

    def _rearm(self) -> None:
        # under self._lock
        if self.closed:
            return
        mask = (IN if self._reading else 0) | (OUT if self._out else 0)
        with contextlib.suppress(OSError, ValueError):
            self._epoll.modify(self.fd, mask)


# -- ZMTP 3.1 framing ----------------------------------------------------------------------

FLAG_MORE = 0x01
FLAG_LONG = 0x02
FLAG_COMMAND = 0x04
_RESERVED = 0xF8
GREETING_SIZE = 64
#: signature, version 3.1, NULL mechanism, as-server = 1, filler
GREETING = (b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x01" + b"NULL".ljust(20, b"\x00")
            + b"\x01" + b"\x00" * 31)
#: socket types a ROUTER may talk to (RFC 28)
PEER_TYPES = (b"DEALER", b"REQ", b"ROUTER")

#: parts of one multipart message accepted (ours are single-frame; the rest is an error)
MAX_PARTS = 16


def frame(body: bytes, flags: int = 0) -> bytes:
    """One frame: header (short or long size) followed by ``body``."""
    size = len(body)
    if size <= 255:
        return struct.pack("!BB", flags, size) + body
    return struct.pack("!BQ", flags | FLAG_LONG, size) + body


def command(name: bytes, data: bytes = b"") -> bytes:
    return frame(bytes([len(name)]) + name + data, FLAG_COMMAND)


def ready() -> bytes:
    """Our READY command: ``Socket-Type: ROUTER``."""
    name, value = b"Socket-Type", b"ROUTER"
    return command(b"READY", bytes([len(name)]) + name + struct.pack("!I", len(value)) + value)


def properties(data: bytes) -> dict[bytes, bytes]:
    """READY metadata: names lower-cased. Raises :class:`ProtocolViolation`."""
    props: dict[bytes, bytes] = {}
    pos = 0
    while pos < len(data):
        size = data[pos]
        name = data[pos + 1:pos + 1 + size]
        pos += 1 + size
        if len(name) != size or pos + 4 > len(data):
            raise ProtocolViolation("malformed metadata in READY")
        (vsize,) = struct.unpack_from("!I", data, pos)
        pos += 4
        if pos + vsize > len(data):
            raise ProtocolViolation("malformed metadata value in READY")
        props[name.lower()] = data[pos:pos + vsize]
        pos += vsize
    return props


class Message(NamedTuple):
    """A complete application message (``parts``), or a command to act on (``command``).
    A named tuple: one is made per message, on the loop's hot path."""

    parts: tuple[bytes, ...] = ()
    command: bytes = b""
    data: bytes = b""


#: a decoder whose buffer has this much room (after a big message) and holds less than
#: ``SHRINK_BELOW`` gets a buffer of the right size (see :meth:`Decoder.messages`)
SHRINK_FROM = 4 * 1024 * 1024
SHRINK_BELOW = 1024 * 1024


class Decoder:
    """Greeting, READY, then frames; fed with :meth:`feed`, read with :meth:`messages`."""

    def __init__(self, max_frame: int) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()
        self._greeted = False
        self._ready = False
        self._parts: list[bytes] = []
        self._parts_size = 0

    @property
    def handshaken(self) -> bool:
        return self._ready

    def feed(self, data: bytes | memoryview) -> None:
        self._buf += data

    def buffered(self) -> int:
        return len(self._buf)

    def messages(self) -> Generator[Message, None, None]:
        """Complete messages and commands in what was fed; raises
        :class:`ProtocolViolation` when the peer broke the protocol."""
        buf = self._buf
        if not self._greeted:
            if buf and buf[0] != 0xFF:
                raise ProtocolViolation("not a ZMTP peer (bad greeting signature)")
            if len(buf) < GREETING_SIZE:
                return
            if not buf[9] & 0x01 or buf[10] < 3:
                raise ProtocolViolation("the peer does not speak ZMTP 3.x")
            if bytes(buf[12:32]).rstrip(b"\x00") != b"NULL":
                raise ProtocolViolation("only the NULL security mechanism is supported")
            del buf[:GREETING_SIZE]
            self._greeted = True
        pos = 0
        try:
            while True:
                if len(buf) - pos < 2:
                    return
                flags = buf[pos]
                if flags & _RESERVED:
                    raise ProtocolViolation(f"frame with reserved flag bits (0x{flags:02x})")
                if flags & FLAG_LONG:
                    if len(buf) - pos < 9:
                        return
                    (size,) = struct.unpack_from("!Q", buf, pos + 1)
                    start = pos + 9
                else:
                    size = buf[pos + 1]
                    start = pos + 2
                limit = self.max_frame if not flags & FLAG_COMMAND else 1 << 16
                if size > limit or self._parts_size + size > self.max_frame:
                    raise ProtocolViolation(
                        f"message larger than the limit of {self.max_frame} bytes")
                if len(buf) - start < size:
                    return
                body = bytes(buf[start:start + size])
                pos = start + size
                msg = self._frame(flags, body)
                if msg is not None:
                    yield msg
        finally:
            del buf[:pos]
            if len(buf) < SHRINK_BELOW and buf.__alloc__() > SHRINK_FROM:
                # a big message's room is kept by the bytearray itself, not reused by
                # anything else: what is left moves to one of its own size
                self._buf = bytearray(buf)

    def _frame(self, flags: int, body: bytes) -> Message | None:
        if flags & FLAG_COMMAND:
            if flags & FLAG_MORE:
                raise ProtocolViolation("command frame with the MORE flag")
            if not body or len(body) < 1 + body[0]:
                raise ProtocolViolation("malformed command frame")
            name, data = body[1:1 + body[0]], body[1 + body[0]:]
            if not self._ready:
                if name != b"READY":
                    raise ProtocolViolation(f"expected READY, got {name!r}")
                peer = properties(data).get(b"socket-type", b"")
                if peer not in PEER_TYPES:
                    raise ProtocolViolation(f"a ROUTER cannot talk to a {peer!r} socket")
                self._ready = True
                return None
            return Message(command=name, data=data)
        if not self._ready:
            raise ProtocolViolation("message before READY")
        self._parts.append(body)
        self._parts_size += len(body)
        if flags & FLAG_MORE:
            if len(self._parts) > MAX_PARTS:
                raise ProtocolViolation(f"a message of more than {MAX_PARTS} parts")
            return None
        parts, self._parts, self._parts_size = tuple(self._parts), [], 0
        return Message(parts=parts)
