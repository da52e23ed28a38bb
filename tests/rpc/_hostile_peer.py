"""Hostile and busy RPC peers, run as separate processes by ``test_rpc_hostile.py``.

``python _hostile_peer.py MODE REPO SOCKET TOKEN EXEC_ID [N]`` prints one JSON line.
Modes: ``fuzz`` (N frames of every poison kind on an authenticated connection, plus
transport-level poison on short-lived ones), ``steady`` (serial calls until stdin closes,
reporting latencies), ``late`` (N pipelined calls, replies read only afterwards),
``burst`` (N concurrent asyncio calls), ``flood`` (as many connections as it can open).
Standard library plus the child runtime's ZMTP client only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import resource
import socket
import struct
import sys
import threading
import time

MODE, REPO, PATH, TOKEN, EXEC = sys.argv[1:6]
N = int(sys.argv[6]) if len(sys.argv) > 6 else 0
sys.path.insert(0, REPO)

from sandbox import zmtp  # noqa: E402
from sandbox.client import RpcClient  # noqa: E402


def hello(conn: zmtp.ZmtpConnection, exec_id: str = EXEC, token: str = TOKEN) -> dict:
    conn.send(json.dumps({"v": 1, "type": "hello", "exec": exec_id, "token": token}).encode())
    return json.loads(conn.recv()[0])


def call(i: object, tool: str = "echo", args: object = None) -> bytes:
    return json.dumps({"v": 1, "type": "call", "id": i, "tool": tool,
                       "args": {} if args is None else args}).encode()


def poison_app() -> list[tuple[tuple[bytes, ...], str | None]]:
    """(frames, id the reply must name or None) of every application-level poison case."""
    deep = b"[" * 5000 + b"]" * 5000
    cases: list[tuple[tuple[bytes, ...], str | None]] = [
        ((deep,), None),
        ((b'{"v":1,"type":"call","id":"d1","tool":"echo","args":{"a":' + deep + b"}}",), "d1"),
        ((b'{"v":1,"type":"hello","exec":' + deep + b"}",), None),
        ((b"{" * 100_000,), None),
        ((b'{"v":1,"type":"call","id":"\\ud800","tool":"echo","args":{}}',), "\ud800"),
        ((b'{"v":1,"type":"call","id":"s2","tool":"\\udc80x","args":{}}',), "s2"),
        ((b'{"v":1,"type":"call","id":"s3","tool":"echo","args":{"p":"\\udcff.txt"}}',), "s3"),
        ((b"\xff\xfe\x00garbage",), None),
        ((b"[]",), None),
        ((b'"just a string"',), None),
        ((b'{"v":2,"type":"call","id":"v2","tool":"echo"}',), "v2"),
        ((b'{"v":1,"type":"nope","id":"t1"}',), "t1"),
        ((b'{"v":1,"type":"call","tool":"echo"}',), None),
        ((b'{"v":1,"type":"call","id":true,"tool":"echo"}',), None),
        ((call("x" * 200),), None),
        ((call("a1", "echo", "not an object"),), "a1"),
        ((b'{"v":1,"type":"call","id":"n1","tool":"echo","args":{"n":' + b"9" * 5000 + b"}}",),
         "n1"),
        ((b'{"v":1,"type":"call","id":"f1","tool":"echo","args":{"n":1e999}}',), "f1"),
        ((b'{"v":1,"type":"call","id":"f2","tool":"echo","args":{"n":NaN}}',), "f2"),
        ((b"",), None),
        ((b'{"v":1,"type":"hello","exec":"x","token":"y"}',), None),
        ((call("m1"), b"second part"), "m1"),
        ((b"\x00" * 70_000,), None),
        ((call("u1", "unknown_tool"),), "u1"),
        ((call("ok1"),), "ok1"),
    ]
    return cases


def poison_transport() -> list[bytes]:
    """Raw bytes after which the host must drop the connection (and nothing else)."""
    greeting = zmtp.GREETING
    ready = zmtp.encode_command(b"READY", zmtp.encode_properties({b"Socket-Type": b"DEALER"}))
    return [
        os.urandom(512),
        b"GET / HTTP/1.1\r\n\r\n",
        greeting[:10] + b"\x02" + greeting[11:],  # ZMTP 2
        greeting[:12] + b"CURVE".ljust(20, b"\0") + greeting[32:],
        greeting + zmtp.encode_frame(b"before ready"),
        greeting + zmtp.encode_command(b"READY", zmtp.encode_properties({b"Socket-Type": b"PUB"})),
        greeting + ready + struct.pack("!BQ", 0x02, 1 << 62),  # a huge declared size
        greeting + ready + bytes([0xF8, 1, 0]),  # reserved flag bits
        greeting + ready + zmtp.encode_frame(b"\x04READY", zmtp.FLAG_COMMAND | zmtp.FLAG_MORE),
        greeting + ready + zmtp.encode_frame(b"x" * 300) * 20 + b"\x01",  # many parts, cut off
        greeting + ready + zmtp.encode_frame(b"\x05ERROR\x03bye", zmtp.FLAG_COMMAND),
        greeting + ready + zmtp.encode_frame(b"\xff", zmtp.FLAG_COMMAND),  # bad command
        greeting + ready + zmtp.encode_frame(call("h1"))  # a call before the hello
        + zmtp.encode_frame(b"[" * 10_000),
    ]


def fuzz(n: int) -> dict:
    rng = random.Random(1234)
    app = poison_app()
    big = [c for c in app if sum(map(len, c[0])) > 4096]
    small = [c for c in app if c not in big]
    conn = zmtp.connect(PATH, timeout=10)
    assert hello(conn)["type"] == "welcome"
    replies: list[dict] = []
    done = threading.Event()

    def read() -> None:
        try:
            while len(replies) < n:
                replies.append(json.loads(conn.recv()[0]))
        finally:
            done.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    expected: dict[str, int] = {}
    kinds = 0
    transport = poison_transport()
    dropped = 0
    for i in range(n):
        r = rng.random()
        if i % 200 == 0:  # the big poison frames (up to 100 kB): often enough, not always
            frames, want = big[(i // 200) % len(big)]
            kinds += 1
        elif r < 0.3:
            frames, want = small[i % len(small)]
            kinds += 1
        elif r < 0.6:
            want = f"c{i}"
            frames = (call(want, "echo", {"i": i, "s": "\udc80" if i % 7 == 0 else "é"}),)
        else:  # random mutation of a valid call
            body = bytearray(call(f"r{i}", "echo", {"i": i}))
            for _ in range(rng.randint(1, 4)):
                body[rng.randrange(len(body))] = rng.randrange(256)
            frames, want = (bytes(body),), None
        if want is not None:
            expected[want] = expected.get(want, 0) + 1
        conn.send(*frames)
        if i % 1000 == 0:  # transport poison on a connection of its own, now and then
            raw = socket.socket(socket.AF_UNIX)
            raw.settimeout(5)
            try:
                raw.connect(PATH)
                raw.sendall(transport[(i // 1000) % len(transport)])
                raw.shutdown(socket.SHUT_WR)
                while raw.recv(65536):
                    pass
                dropped += 1
            except OSError:
                pass
            finally:
                raw.close()
    done.wait(120)
    named: dict[str, int] = {}
    for rep in replies:
        if isinstance(rep.get("id"), str):
            named[rep["id"]] = named.get(rep["id"], 0) + 1
    missing = [k for k, v in expected.items() if named.get(k, 0) < v]
    conn.close()
    return {"sent": n, "replies": len(replies), "missing": missing[:20],
            "poison": kinds, "transport_dropped": dropped}


def steady() -> dict:
    client = RpcClient(PATH, TOKEN, EXEC)
    client.connect()
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    lat: list[float] = []
    print("ready", flush=True)
    i = 0
    while not stop.is_set():
        t0 = time.perf_counter()
        got = client.call("echo", {"i": i})
        lat.append(time.perf_counter() - t0)
        assert got["args"]["i"] == i, got
        i += 1
    client.close()
    lat.sort()
    return {"calls": len(lat), "p50_ms": lat[len(lat) // 2] * 1e3 if lat else None,
            "p99_ms": lat[int(len(lat) * 0.99)] * 1e3 if lat else None,
            "max_ms": lat[-1] * 1e3 if lat else None}


def late(n: int) -> dict:
    conn = zmtp.connect(PATH, timeout=10)
    assert hello(conn)["type"] == "welcome"
    for i in range(n):
        conn.send(call(str(i), "echo", {"i": i}))
    time.sleep(1.0)  # the reader starts late: every reply waits at the host meanwhile
    ids = set()
    conn._sock.settimeout(30)
    while len(ids) < n:
        ids.add(json.loads(conn.recv()[0])["id"])
    conn.close()
    return {"sent": n, "distinct_replies": len(ids)}


def burst(n: int) -> dict:
    client = RpcClient(PATH, TOKEN, EXEC)

    async def main() -> list:
        return await asyncio.wait_for(
            asyncio.gather(*(client.acall("echo", {"i": i}) for i in range(n))), 60)

    got = asyncio.run(main())
    client.close()
    return {"sent": n, "correct": sum(r["args"]["i"] == i for i, r in enumerate(got))}


def flood(n: int) -> dict:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    socks, errors = [], 0
    for _ in range(n):  # non-blocking: a full backlog says EAGAIN instead of waiting
        s = socket.socket(socket.AF_UNIX)
        s.setblocking(False)
        if s.connect_ex(PATH) == 0:
            socks.append(s)
        else:
            errors += 1
            s.close()
    time.sleep(0.5)
    greeted = 0  # accepted by the host: its greeting arrived
    for s in socks:
        with contextlib.suppress(OSError):  # nothing yet: waiting in the backlog
            greeted += bool(s.recv(64))
    for s in socks:
        s.close()
    return {"opened": len(socks), "greeted": greeted, "connect_errors": errors}


if __name__ == "__main__":
    fn = {"fuzz": fuzz, "late": late, "burst": burst, "flood": flood}.get(MODE)
    print(json.dumps(steady() if MODE == "steady" else fn(N)), flush=True)  # type: ignore[misc]
