"""The standard-library ZMTP client against real libzmq peers and hand-scripted servers."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
from _sandbox_peers import RawServer, read_exact, read_frame, server_handshake

from sandbox import zmtp


class Router:
    """A bare pyzmq ROUTER for transport-level tests (driven from the test thread)."""

    def __init__(self, path: Path, **options: int) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.linger = 0
        self.sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        for name, value in options.items():
            self.sock.setsockopt(getattr(zmq, name), value)
        self.sock.bind(f"ipc://{path}")

    def recv(self, timeout: float = 5.0) -> list[bytes]:
        assert self.sock.poll(int(timeout * 1000)), "nothing arrived at the router"
        return self.sock.recv_multipart()

    def close(self) -> None:
        self.sock.close(linger=0)
        self.ctx.term()


@pytest.fixture
def router(short_dir: Path) -> Iterator[Router]:
    r = Router(short_dir / "rpc.sock")
    yield r
    r.close()


def connect(path: Path, **kw: float) -> zmtp.ZmtpConnection:
    return zmtp.connect(str(path), **kw)


def test_encode_frame_sizes() -> None:
    assert zmtp.encode_frame(b"x" * 255)[:2] == b"\x00\xff"
    long = zmtp.encode_frame(b"x" * 256, zmtp.FLAG_MORE)
    assert long[0] == zmtp.FLAG_MORE | zmtp.FLAG_LONG
    assert struct.unpack("!Q", long[1:9]) == (256,)


def test_properties_round_trip_and_malformed() -> None:
    data = zmtp.encode_properties({b"Socket-Type": b"ROUTER", b"X-Empty": b""})
    assert zmtp.decode_properties(data) == {b"socket-type": b"ROUTER", b"x-empty": b""}
    with pytest.raises(zmtp.ZmtpError):
        zmtp.decode_properties(data[:-3])


def test_handshake_as_dealer_without_identity(router: Router, short_dir: Path) -> None:
    with connect(short_dir / "rpc.sock") as conn:
        assert conn.minor == 1  # libzmq 4.x speaks ZMTP 3.1
        assert conn.peer_properties[b"socket-type"] == b"ROUTER"
        conn.send(b"hello")
        ident, body = router.recv()
        assert body == b"hello"
        # the ROUTER assigned the identity (libzmq's generated ones start with a zero byte)
        assert ident[:1] == b"\x00"


def test_multi_frame_messages_both_ways(router: Router, short_dir: Path) -> None:
    with connect(short_dir / "rpc.sock") as conn:
        conn.send(b"a", b"", b"c" * 300)
        ident, *frames = router.recv()
        assert frames == [b"a", b"", b"c" * 300]
        router.sock.send_multipart([ident, b"x", b"y" * 70_000, b"z"])
        assert conn.recv() == [b"x", b"y" * 70_000, b"z"]


@pytest.mark.parametrize("size", [0, 255, 256, 65_536 + 7, 5 * 1024 * 1024])
def test_frame_sizes_both_ways(router: Router, short_dir: Path, size: int) -> None:
    payload = bytes(range(256)) * (size // 256) + b"q" * (size % 256)
    with connect(short_dir / "rpc.sock") as conn:
        conn.send(payload)
        ident, body = router.recv()
        assert body == payload
        router.sock.send_multipart([ident, payload[::-1]])
        assert conn.recv() == [payload[::-1]]


def test_answers_libzmq_heartbeats(short_dir: Path) -> None:
    # libzmq PINGs every 30 ms and drops a peer that does not PONG within 150 ms
    router = Router(short_dir / "rpc.sock", HEARTBEAT_IVL=30, HEARTBEAT_TIMEOUT=150)
    try:
        with connect(short_dir / "rpc.sock") as conn:
            conn.send(b"hi")
            ident, _ = router.recv()
            got: list[list[bytes]] = []
            reader = threading.Thread(target=lambda: got.append(conn.recv()))
            reader.start()
            deadline = time.monotonic() + 10
            while conn.pings < 10 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert conn.pings >= 10
            # still connected: ROUTER_MANDATORY would raise EHOSTUNREACH otherwise
            router.sock.send_multipart([ident, b"still there"])
            reader.join(5)
            assert got == [[b"still there"]]
    finally:
        router.close()


def test_peer_disappears_while_receiving(short_dir: Path) -> None:
    router = Router(short_dir / "rpc.sock")
    with connect(short_dir / "rpc.sock") as conn:
        errors: list[BaseException] = []

        def read() -> None:
            try:
                conn.recv()
            except zmtp.ZmtpError as exc:
                errors.append(exc)

        reader = threading.Thread(target=read)
        reader.start()
        conn.send(b"x")
        router.recv()
        router.close()
        reader.join(5)
        assert not reader.is_alive()
        assert isinstance(errors[0], zmtp.PeerClosed)
        with pytest.raises(zmtp.PeerClosed):
            for _ in range(100):  # the kernel may buffer the first sends
                conn.send(b"y" * 100_000)


def test_close_wakes_a_blocked_reader_and_is_idempotent(router: Router, short_dir: Path) -> None:
    conn = connect(short_dir / "rpc.sock")
    errors: list[BaseException] = []

    def read() -> None:
        try:
            conn.recv()
        except zmtp.PeerClosed as exc:
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.05)
    conn.close()
    conn.close()
    reader.join(5)
    assert not reader.is_alive() and errors
    assert conn.closed
    with pytest.raises(zmtp.PeerClosed):
        conn.send(b"late")


def test_connect_to_missing_socket(short_dir: Path) -> None:
    with pytest.raises(zmtp.PeerClosed, match="cannot connect"):
        connect(short_dir / "nothing.sock")


# -- hand-scripted servers ----------------------------------------------------------------


def test_partial_reads_byte_by_byte(short_dir: Path) -> None:
    path = short_dir / "raw.sock"
    big = b"B" * 70_000
    stream = (zmtp.GREETING
              + zmtp.encode_command(b"READY", zmtp.encode_properties({b"Socket-Type": b"ROUTER"}))
              + zmtp.encode_command(b"PING", b"\x00\x00ctx")
              + zmtp.encode_frame(b"one", zmtp.FLAG_MORE) + zmtp.encode_frame(b"two")
              + zmtp.encode_frame(b"x" * 300))
    seen: list[bytes] = []

    def dribble(conn: socket.socket) -> None:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        for i in range(len(stream)):
            conn.sendall(stream[i:i + 1])
            if i % 64 == 0:
                time.sleep(0.0005)
        conn.sendall(zmtp.encode_frame(big))  # a long frame in odd-sized pieces too
        read_exact(conn, 64)
        seen.append(read_frame(conn)[1])  # READY
        seen.append(read_frame(conn)[1])  # PONG
        conn.recv(1)  # wait for the client to hang up

    with RawServer(path, dribble), connect(path) as conn:
        assert conn.recv() == [b"one", b"two"]
        assert conn.recv() == [b"x" * 300]
        assert conn.recv() == [big]
        assert conn.pings == 1
    assert seen[1] == b"\x04PONGctx"


def test_zmtp_3_0_peer(short_dir: Path) -> None:
    path = short_dir / "raw.sock"

    def serve(conn: socket.socket) -> None:
        server_handshake(conn, greeting=zmtp.GREETING[:11] + b"\x00" + zmtp.GREETING[12:])
        conn.sendall(zmtp.encode_frame(b"from 3.0"))
        assert read_frame(conn) == (0, b"reply")

    with RawServer(path, serve), connect(path) as conn:
        assert conn.minor == 0
        assert conn.recv() == [b"from 3.0"]
        conn.send(b"reply")


def test_ping_ttl_is_honoured(short_dir: Path) -> None:
    path = short_dir / "raw.sock"
    release = threading.Event()

    def ping_then_silence(conn: socket.socket) -> None:
        server_handshake(conn)
        conn.sendall(zmtp.encode_command(b"PING", struct.pack("!H", 3)))  # TTL 0.3 s
        release.wait(10)  # alive but silent

    with RawServer(path, ping_then_silence):
        with connect(path) as conn, pytest.raises(zmtp.PeerClosed, match="heartbeat TTL"):
            conn.recv()
        release.set()


@pytest.mark.parametrize("greeting, match", [
    (b"GET / HTTP/1.1\r\n" + b"\x00" * 48, "signature"),
    (zmtp.GREETING[:10] + b"\x02\x00" + zmtp.GREETING[12:], "3.x is required"),
    (zmtp.GREETING[:12] + b"CURVE".ljust(20, b"\x00") + zmtp.GREETING[32:], "CURVE"),
])
def test_bad_greetings(short_dir: Path, greeting: bytes, match: str) -> None:
    path = short_dir / "raw.sock"

    def serve(conn: socket.socket) -> None:
        conn.sendall(greeting)
        conn.recv(1024)

    with RawServer(path, serve), pytest.raises(zmtp.ZmtpError, match=match):
        connect(path)


@pytest.mark.parametrize("ready, exc, match", [
    (zmtp.encode_command(b"ERROR", b"\x0bgo away now"), zmtp.PeerError, "go away now"),
    (zmtp.encode_frame(b"data first"), zmtp.ZmtpError, "before READY"),
    (zmtp.encode_command(b"READY", zmtp.encode_properties({b"Socket-Type": b"PUB"})),
     zmtp.ZmtpError, "PUB"),
    (zmtp.encode_command(b"READY", b"\x05Sock"), zmtp.ZmtpError, "malformed"),
])
def test_bad_handshakes(short_dir: Path, ready: bytes, exc: type, match: str) -> None:
    path = short_dir / "raw.sock"

    def serve(conn: socket.socket) -> None:
        server_handshake(conn, ready=ready)
        conn.recv(1024)

    with RawServer(path, serve), pytest.raises(exc, match=match):
        connect(path)


def test_handshake_deadline(short_dir: Path) -> None:
    path = short_dir / "raw.sock"
    release = threading.Event()
    with RawServer(path, lambda conn: release.wait(10)):
        with pytest.raises(zmtp.ZmtpError, match="timed out"):
            connect(path, timeout=0.2)
        release.set()


@pytest.mark.parametrize("wire, match", [
    (b"\x10\x01x", "reserved flag"),
    (b"\x02" + struct.pack("!Q", 1 << 40), "exceeds the limit"),
    (zmtp.encode_command(b"ERROR", b"\x04boom"), "boom"),
    (zmtp.encode_frame(b"\x04PING", zmtp.FLAG_COMMAND | zmtp.FLAG_MORE), "MORE"),
    (zmtp.encode_command(b"PING", b""), "malformed PING"),
    (b"\x00\x05ab", "peer closed"),  # truncated frame, then EOF
])
def test_malformed_input_after_handshake(short_dir: Path, wire: bytes, match: str) -> None:
    path = short_dir / "raw.sock"

    def serve(conn: socket.socket) -> None:
        server_handshake(conn)
        conn.sendall(zmtp.encode_command(b"X-FUTURE", b"ignored") + wire)

    with RawServer(path, serve), connect(path) as conn, pytest.raises(zmtp.ZmtpError, match=match):
        conn.recv()


@pytest.mark.parametrize("frames", [(b"x" * (8 << 20),), (b"head", b"y" * (8 << 20))],
                         ids=["one frame", "two frames"])
def test_a_send_interrupted_part_way_is_finished_by_the_next(frames: tuple[bytes, ...]) -> None:
    # the peer reads nothing, so the 8 MiB send blocks part way; a signal handler raises
    # there. The rest stays queued and goes out before the next message: the peer reads
    # whole frames (a torn frame would make the second message's header part of a body)
    import signal

    class Interrupted(Exception):
        pass

    def on_signal(signum: int, frame: object) -> None:
        raise Interrupted

    main = threading.get_ident()
    ours, peer = socket.socketpair()
    conn = zmtp.ZmtpConnection(ours)

    def interrupt_once_blocked() -> None:
        import select

        select.select([peer], [], [])  # the send has begun; it cannot finish unread
        signal.pthread_kill(main, signal.SIGUSR1)

    old = signal.signal(signal.SIGUSR1, on_signal)
    try:
        waker = threading.Thread(target=interrupt_once_blocked)
        waker.start()
        with pytest.raises(Interrupted):
            conn.send(*frames)
        waker.join()
        received: list[tuple[int, bytes]] = []
        reader = threading.Thread(target=lambda: received.extend(
            read_frame(peer) for _ in range(len(frames) + 1)))
        reader.start()
        conn.send(b"next")
        reader.join(30)
        flags = [(zmtp.FLAG_MORE if i < len(frames) - 1 else 0)
                 | (zmtp.FLAG_LONG if len(frame) > 255 else 0) for i, frame in enumerate(frames)]
        assert received == [*zip(flags, frames, strict=True), (0, b"next")]
    finally:
        signal.signal(signal.SIGUSR1, old)
        conn.close()
        peer.close()


def test_a_send_from_a_signal_handler_during_a_send_fails_at_once() -> None:
    # the handler's send would tear the frame under way (or wait forever for a lock its
    # own thread holds): it is refused, and the interrupted send completes whole
    import signal

    main = threading.get_ident()
    ours, peer = socket.socketpair()
    conn = zmtp.ZmtpConnection(ours)
    refused: list[BaseException] = []

    def on_signal(signum: int, frame: object) -> None:
        try:
            conn.send(b"from the handler")
        except zmtp.ZmtpError as exc:
            refused.append(exc)

    def interrupt_then_read() -> list[tuple[int, bytes]]:
        import select

        select.select([peer], [], [])  # the send has begun; it cannot finish unread
        signal.pthread_kill(main, signal.SIGUSR1)
        return [read_frame(peer) for _ in range(2)]

    old = signal.signal(signal.SIGUSR1, on_signal)
    received: list[tuple[int, bytes]] = []
    try:
        reader = threading.Thread(target=lambda: received.extend(interrupt_then_read()))
        reader.start()
        big = b"x" * (8 << 20)
        conn.send(big)
        conn.send(b"next")
        reader.join(30)
        assert [str(e) for e in refused] == [
            "cannot send from a signal handler that interrupted a send on the same connection"]
        assert received == [(zmtp.FLAG_LONG, big), (0, b"next")]
    finally:
        signal.signal(signal.SIGUSR1, old)
        conn.close()
        peer.close()


def test_peek_at_steps_over_commands_and_removes_nothing() -> None:
    ours, peer = socket.socketpair()
    conn = zmtp.ZmtpConnection(ours)
    try:
        wire = (zmtp.encode_frame(b"one") + zmtp.encode_command(b"PONG", b"")
                + zmtp.encode_frame(b"two", zmtp.FLAG_MORE) + zmtp.encode_frame(b"three"))
        peer.sendall(wire[:-2])
        pos = 0
        seen = []
        while True:
            found = conn.peek_at(pos)
            if isinstance(found, int):
                if seen == [[b"one"]]:
                    peer.sendall(wire[-2:])  # the rest of the last frame
                conn.pull(found)
                continue
            frames, pos = found
            seen.append(frames)
            if len(seen) == 2:
                break
        assert seen == [[b"one"], [b"two", b"three"]]
        assert bytes(conn._buf) == wire  # nothing removed; the PONG stays for peek
        assert conn.recv() == [b"one"]
        assert conn.recv() == [b"two", b"three"]
    finally:
        conn.close()
        peer.close()
