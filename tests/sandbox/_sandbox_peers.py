"""Peers for the child-side tests: a pyzmq ROUTER host and a scripted raw-socket server."""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zmq

TOKEN = "ab" * 32
EXEC_ID = "e1e1"

Reply = dict[str, Any] | bytes | list[bytes] | tuple[Any, ...] | None
#: (delay in seconds, reply): a dict is sent as JSON, bytes as one raw frame, a list as the
#: frames of one message, a tuple as several messages; None sends nothing
Handler = Callable[[dict[str, Any]], tuple[float, Reply]]


def echo(msg: dict[str, Any]) -> tuple[float, Reply]:
    result = json.dumps({"tool": msg["tool"], "args": msg["args"]})
    return 0.0, {"v": 1, "type": "result", "id": msg["id"], "result": result}


class FakeHost:
    """A pyzmq ROUTER bound at ``ipc://<path>`` that checks hellos and answers calls through
    ``handler`` from its own thread (replies may be delayed, so they go out of order).

    ``hold`` calls (when set) are answered only once that many calls are waiting; they
    then go out in reverse order of arrival.
    """

    def __init__(self, path: Path, *, handler: Handler = echo, hold: int = 0,
                 heartbeat_ms: int = 0, heartbeat_timeout_ms: int = 0,
                 max_tool_calls: int = 50, welcome_extra: dict[str, Any] | None = None) -> None:
        self.path = path
        self.handler = handler
        self.hold = hold
        self.max_tool_calls = max_tool_calls
        self.welcome_extra = welcome_extra or {}
        self.hellos: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []
        self.raw: list[list[bytes]] = []
        self.hello_seen = threading.Event()
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.ROUTER)
        self._sock.linger = 0
        self._sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        if heartbeat_ms:
            self._sock.setsockopt(zmq.HEARTBEAT_IVL, heartbeat_ms)
        if heartbeat_timeout_ms:
            self._sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, heartbeat_timeout_ms)
        self._sock.bind(f"ipc://{path}")
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._outbox: list[tuple[float, int, bytes, list[bytes]]] = []
        self._seq = itertools.count()
        self._held: list[tuple[bytes, dict[str, Any]]] = []
        self._close_now = threading.Event()
        self.errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, name="fake-host", daemon=True)
        self._thread.start()

    # -- the host thread -----------------------------------------------------------------

    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        try:
            while not self._stop.is_set():
                if self._close_now.is_set():
                    self._sock.close(linger=0)
                    return
                now = time.monotonic()
                while self._outbox and self._outbox[0][0] <= now:
                    _, _, ident, frames = heapq.heappop(self._outbox)
                    with contextlib.suppress(zmq.ZMQError):  # the peer is gone
                        self._sock.send_multipart([ident, *frames])
                wait = 20.0
                if self._outbox:
                    wait = max(0.0, min(wait, (self._outbox[0][0] - now) * 1000))
                if dict(poller.poll(wait)).get(self._sock):
                    self._receive(self._sock.recv_multipart())
        except BaseException as exc:  # surfaced by close()
            self.errors.append(exc)

    def _receive(self, frames: list[bytes]) -> None:
        ident, body = frames[0], frames[1:]
        self.raw.append(body)
        msg = json.loads(body[-1])
        if msg.get("type") == "hello":
            self.hellos.append(msg)
            if msg.get("token") == TOKEN and msg.get("exec") == EXEC_ID:
                reply = {"v": 1, "type": "welcome", "exec": EXEC_ID,
                         "max_tool_calls": self.max_tool_calls, **self.welcome_extra}
            else:
                reply = {"v": 1, "type": "denied", "error": "wrong token or execution id"}
            self._schedule(0.0, ident, reply)
            self.hello_seen.set()
            return
        self.calls.append(msg)
        if self.hold:
            self._held.append((ident, msg))
            if len(self._held) >= self.hold:
                for held_ident, held in reversed(self._held):
                    self._schedule(*self._answer(held_ident, held))
                self._held.clear()
            return
        self._schedule(*self._answer(ident, msg))

    def _answer(self, ident: bytes, msg: dict[str, Any]) -> tuple[float, bytes, Reply]:
        delay, reply = self.handler(msg)
        return delay, ident, reply

    def _schedule(self, delay: float, ident: bytes, reply: Reply) -> None:
        if reply is None:
            return
        if isinstance(reply, tuple):
            for one in reply:
                self._schedule(delay, ident, one)
            return
        if isinstance(reply, dict):
            frames = [json.dumps(reply).encode()]
        elif isinstance(reply, bytes):
            frames = [reply]
        else:
            frames = list(reply)
        heapq.heappush(self._outbox, (time.monotonic() + delay, next(self._seq), ident, frames))

    # -- control from the test -----------------------------------------------------------

    def drop(self) -> None:
        """Close the ROUTER socket now (the host vanishes); the loop then ends."""
        self._close_now.set()
        self._thread.join(5)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        assert not self._thread.is_alive(), "fake host thread did not stop"
        if not self._sock.closed:
            self._sock.close(linger=0)
        self._ctx.term()
        if self.errors:
            raise self.errors[0]

    def __enter__(self) -> FakeHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RawServer:
    """A Unix-socket server that runs ``script(conn)`` on the first connection in a thread
    (to speak broken or dribbled ZMTP by hand)."""

    def __init__(self, path: Path, script: Callable[[socket.socket], None]) -> None:
        self.path = path
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen(1)
        self._listener.settimeout(10)
        self._script = script
        self.errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except OSError as exc:
            self.errors.append(exc)
            return
        with conn:
            try:
                conn.settimeout(10)
                self._script(conn)
            except OSError:
                pass  # the client hung up first
            except BaseException as exc:
                self.errors.append(exc)

    def close(self) -> None:
        self._thread.join(15)
        self._listener.close()
        if os.path.exists(self.path):
            os.unlink(self.path)
        assert not self._thread.is_alive()
        if self.errors:
            raise self.errors[0]

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("client closed")
        data += chunk
    return data


def read_frame(conn: socket.socket) -> tuple[int, bytes]:
    flags, size = read_exact(conn, 2)
    if flags & 0x02:
        size = int.from_bytes(bytes([size]) + read_exact(conn, 7), "big")
    return flags, read_exact(conn, size)


def server_handshake(conn: socket.socket, *, greeting: bytes | None = None,
                     ready: bytes | None = None) -> None:
    """Play the server side of a ZMTP 3.1 NULL handshake as a ROUTER."""
    from sandbox import zmtp

    conn.sendall(greeting if greeting is not None else zmtp.GREETING)
    read_exact(conn, 64)
    flags, body = read_frame(conn)
    assert flags & 0x04 and body[1:6] == b"READY"
    conn.sendall(ready if ready is not None else zmtp.encode_command(
        b"READY", zmtp.encode_properties({b"Socket-Type": b"ROUTER"})))
