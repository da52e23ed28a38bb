from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import zmq

from execengine.rpc import RpcServer


class Peer:
    """A real pyzmq DEALER speaking the protocol, as a child would."""

    def __init__(self, ctx: zmq.Context, path: str, **options: int) -> None:
        self.sock = ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        for name, value in options.items():  # before connect: they apply to the handshake
            self.sock.setsockopt(getattr(zmq, name), value)
        self.sock.connect(f"ipc://{path}")

    def send(self, obj: Any) -> None:
        self.sock.send(obj if isinstance(obj, bytes) else json.dumps(obj).encode())

    def recv(self, timeout: float = 5.0) -> dict[str, Any]:
        if not self.sock.poll(int(timeout * 1000)):
            raise TimeoutError("no reply")
        return json.loads(self.sock.recv())

    def silent(self, timeout: float = 0.3) -> bool:
        return not self.sock.poll(int(timeout * 1000))

    def hello(self, exec_id: str, token: str) -> dict[str, Any]:
        self.send({"v": 1, "type": "hello", "exec": exec_id, "token": token, "pid": 1})
        return self.recv()

    def call(self, id: str, tool: str, args: dict | None = None) -> None:
        self.send({"v": 1, "type": "call", "id": id, "tool": tool, "args": args or {}})

    def close(self) -> None:
        self.sock.close(linger=0)


class Harness:
    def __init__(self, server: RpcServer, ctx: zmq.Context) -> None:
        self.server, self.ctx = server, ctx
        self.peers: list[Peer] = []
        self.calls: list[tuple[str, dict]] = []
        self.lock = threading.Lock()

    def handler(self, tool: str, args: dict) -> str:
        with self.lock:
            self.calls.append((tool, args))
        if tool == "sleep":
            time.sleep(args.get("s", 0.1))
        if tool == "boom":
            raise RuntimeError("kaboom")
        return json.dumps({"tool": tool, "args": args})

    def open(self, allowed=("echo", "sleep", "boom"), max_tool_calls=50, handler=None):
        exec_id, token = secrets.token_hex(8), secrets.token_hex(32)
        ch = self.server.open(exec_id=exec_id, token=token, allowed=allowed,
                              handler=handler or self.handler, max_tool_calls=max_tool_calls)
        ch.test_token = token  # type: ignore[attr-defined]
        return ch

    def peer(self, ch, **options: int) -> Peer:
        p = Peer(self.ctx, ch.socket_path, **options)
        self.peers.append(p)
        return p


@pytest.fixture
def rpc() -> Iterator[Harness]:
    ctx = zmq.Context()
    server = RpcServer(max_workers=8, max_parallel_calls=4, max_message_bytes=1 << 20)
    h = Harness(server, ctx)
    try:
        yield h
    finally:
        for p in h.peers:
            p.close()
        server.close()
        ctx.term()


@pytest.fixture
def small() -> Iterator[Harness]:
    """A server whose calls in flight may hold 3.5 MiB, one execution call at a time
    (``test_rpc_budget.py``)."""
    ctx = zmq.Context()
    mib = 1024 * 1024
    server = RpcServer(max_workers=8, max_parallel_calls=1, max_message_bytes=4 * mib,
                       max_inflight_bytes=3 * mib + mib // 2)
    h = Harness(server, ctx)
    try:
        yield h
    finally:
        for p in h.peers:
            p.close()
        server.close()
        ctx.term()
