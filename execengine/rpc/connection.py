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

The protocol's messages, version 1 (see ``docs/protocol.md``), the JSON body of one frame:
pure functions that parse a frame from a child into a typed request and build the JSON
replies, so the whole protocol is tested without a socket too. :func:`parse` never raises,
whatever the bytes. Before a frame is decoded its nesting depth is bounded (:func:`too_deep`,
at C speed), so no JSON body can exhaust the recursion limit here or in a tool later; the
frame's size is bounded by the codec before it is read. Replies are encoded so that no
string can fail: text holding a lone surrogate (a surrogate-escaped file name, an id sent as
``"\\ud800"``) is sent with JSON escapes instead of raw UTF-8.
"""

from __future__ import annotations

import contextlib
import json
import re
import select
import socket
import struct
import threading
from array import array
from collections import deque
from collections.abc import Generator
from itertools import accumulate
from typing import TYPE_CHECKING, Any, NamedTuple

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


# -- the protocol's messages ------------------------------------------------------------

VERSION = 1
#: longest request id accepted (ids are echoed back, so they are bounded)
MAX_ID_CHARS = 128
MAX_TOOL_NAME_CHARS = 128
#: deepest nesting of arrays/objects accepted in a message (the envelope counts as 1)
MAX_DEPTH = 64
#: most brackets outside strings in one message (bounds the depth scan's work)
MAX_BRACKETS = 2_000_000

#: a JSON string once its escaped backslashes and quotes are gone (see :func:`too_deep`)
_PLAIN_STRING = re.compile(rb'"[^"]*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


# Named tuples: made for every message, in a third of a frozen dataclass's time


class Hello(NamedTuple):
    exec_id: str
    token: str
    pid: int | None = None


class Call(NamedTuple):
    id: str
    tool: str
    args: dict[str, Any]
    #: the session cell's call credential the client sent (see ``Channel.open_cell``)
    cell: str | None = None


class Invalid(NamedTuple):
    """A message that cannot be served. ``id`` is set when the reply can name the request."""

    error: str
    id: str | None = None


#: a child's message, parsed
Request = Hello | Call | Invalid


def too_deep(frame: bytes, limit: int = MAX_DEPTH, noun: str = "message") -> str | None:
    """Why ``frame`` (a ``noun``: a message, a task line) nests too deeply to be decoded,
    or None. Strings are skipped, so brackets inside them do not count; everything runs
    in C but one pass over the brackets, which :data:`MAX_BRACKETS` bounds."""
    if frame.count(b"[") + frame.count(b"{") <= limit:
        return None  # fast path: not even that many opening brackets anywhere
    # Escapes out first (backslash pairs, then backslash-quote, left to right as JSON reads
    # them), then every string runs quote to quote. Linear whatever the bytes: a pattern
    # that matches the escapes itself backtracks over an unterminated string of escaped
    # quotes from every later quote (quadratic: a 112 KB frame held the loop, and the
    # interpreter lock with it, for 28 s)
    plain = frame.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = _PLAIN_STRING.sub(b"", plain).translate(None, _NOT_BRACKETS)
    if len(brackets) > MAX_BRACKETS:
        return f"{noun} has more than {MAX_BRACKETS} nested values"
    steps = array("b")  # signed bytes: +1 for an opening bracket, -1 (0xff) closing
    steps.frombytes(brackets.translate(_STEP))
    depth = max(accumulate(steps), default=0)
    if depth > limit:
        return f"{noun} nests deeper than {limit} levels"
    return None


#: a top-level ``"id"`` key, what follows it up to its value (see :func:`request_id`)
_ID_KEY = b'"id"'
_ID_VALUE = re.compile(rb'\s*:\s*(?:"([^"\\]{1,%d})"|(-?\d{1,%d}))\s*(?:[,}]|$)'
                       % (4 * MAX_ID_CHARS, MAX_ID_CHARS))
#: top-level ``"id"`` candidates looked at (each costs a scan of the frame before it)
_ID_TRIES = 8


def request_id(frame: bytes) -> str | None:
    """The id of a request that cannot be decoded (nested too deeply, not JSON), so that
    its error reply names it and the client fails that one call, not its connection.

    Best effort, without decoding: the first ``"id"`` key at the top level of the object
    whose value is a plain string (no escapes) or an integer. Every step runs in C: an
    occurrence of ``"id"`` is at the top level when the brackets before it, outside
    strings, leave exactly one open (strings are found as :func:`too_deep` finds them,
    escapes first). In valid JSON a ``"id"`` outside a string is always a string token.
    """
    if frame.lstrip()[:1] != b"{":
        return None
    # escaped backslashes and quotes made harmless, offsets kept
    plain = frame.replace(b"\\\\", b"__").replace(b'\\"', b"__")
    pos = -1
    for _ in range(_ID_TRIES):
        pos = plain.find(_ID_KEY, pos + 1)
        if pos < 0:
            return None
        before = _PLAIN_STRING.sub(b"", plain[:pos])
        if before.count(b'"'):
            continue  # inside a string after all (an unterminated one before it)
        opened = before.count(b"{") + before.count(b"[")
        if opened - before.count(b"}") - before.count(b"]") != 1:
            continue
        value = _ID_VALUE.match(frame, pos + len(_ID_KEY))
        if value is None:
            continue
        text, number = value.groups()
        try:
            return _valid_id(text.decode("utf-8") if text is not None else int(number))
        except UnicodeDecodeError:
            return None
    return None


def parse(frame: bytes) -> Request:
    """Decode one application frame; never raises. A frame that cannot be decoded is
    :class:`Invalid` with the id :func:`request_id` finds in it."""
    try:
        deep = too_deep(frame)
        if deep is not None:
            return Invalid(deep, request_id(frame))
        obj = _loads(frame.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError, MemoryError) as exc:
        return Invalid(f"message is not UTF-8 JSON: {type(exc).__name__}", request_id(frame))
    if not isinstance(obj, dict):
        return Invalid(f"message must be a JSON object, got {type(obj).__name__}")
    raw_id = obj.get("id")
    msg_id = _valid_id(raw_id)
    if obj.get("v") != VERSION:
        return Invalid(f"unsupported protocol version {obj.get('v')!r} (expected {VERSION})",
                       msg_id)
    kind = obj.get("type")
    if kind == "hello":
        exec_id, token, pid = obj.get("exec"), obj.get("token"), obj.get("pid")
        if not isinstance(exec_id, str) or not isinstance(token, str):
            return Invalid("hello needs string fields 'exec' and 'token'")
        return Hello(exec_id, token, pid if isinstance(pid, int) else None)
    if kind == "call":
        if msg_id is None:
            return Invalid("call needs a string 'id' of at most "
                           f"{MAX_ID_CHARS} characters")
        tool = obj.get("tool")
        if not isinstance(tool, str) or not tool or len(tool) > MAX_TOOL_NAME_CHARS:
            return Invalid("call needs a non-empty string 'tool'", msg_id)
        args = obj.get("args", {})
        if args is None:
            args = {}
        if not isinstance(args, dict):
            return Invalid(f"'args' must be a JSON object, got {type(args).__name__}", msg_id)
        cell = obj.get("cell")
        return Call(msg_id, tool, args,
                    cell if isinstance(cell, str) and len(cell) <= MAX_ID_CHARS else None)
    return Invalid(f"unknown message type {kind!r}", msg_id)


#: json's C scanner: one JSON value at a position of a string (what ``json.loads`` runs
#: after two regular-expression matches and three Python frames)
_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _loads(text: str) -> Any:
    """``json.loads(text)``, the common case (no whitespace around the value) in C. The
    script's client decodes replies with its own copy (``sandbox/client.py``: the child's
    runtime imports nothing of the host's)."""
    try:
        obj, end = _scan(text, 0)
    except StopIteration:
        return json.loads(text)  # leading whitespace, or not JSON: its error
    if end != len(text):
        return json.loads(text)  # trailing whitespace, or extra data: its error
    return obj


def _valid_id(raw: Any) -> str | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        raw = str(raw)
    if isinstance(raw, str) and 0 < len(raw) <= MAX_ID_CHARS:
        return raw
    return None


def _dump(obj: dict[str, Any]) -> bytes:
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: JSON escapes are plain ASCII
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def welcome(exec_id: str, max_tool_calls: int, max_message_bytes: int | None = None) -> bytes:
    msg: dict[str, Any] = {"v": VERSION, "type": "welcome", "exec": exec_id,
                           "max_tool_calls": max_tool_calls}
    if max_message_bytes is not None:
        msg["max_message_bytes"] = max_message_bytes
    return _dump(msg)


def denied(error: str) -> bytes:
    return _dump({"v": VERSION, "type": "denied", "error": error})


#: json's own C string encoders: ``"..."`` with non-ASCII kept, and all-ASCII
_quote = json.encoder.encode_basestring
_quote_ascii = json.encoder.encode_basestring_ascii
_RESULT_HEAD = f'{{"v":{VERSION},"type":"result","id":'


def result(msg_id: str, text: str) -> bytes:
    """The reply to a call (every call gets one): built from a template, the hot path."""
    head = _RESULT_HEAD
    try:
        return (head + _quote(msg_id) + ',"result":' + _quote(text) + "}").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: JSON escapes are plain ASCII
        return (head + _quote_ascii(msg_id) + ',"result":' + _quote_ascii(text)
                + "}").encode("ascii")


def error(msg_id: str | None, message: str) -> bytes:
    return _dump({"v": VERSION, "type": "error", "id": msg_id, "error": message})
