"""Whatever one peer sends, the host stays up and every other execution keeps its replies.

The peers are separate processes (``_hostile_peer.py``) speaking ZMTP with the child
runtime's own client, against a real :class:`RpcServer` in this process: had the server
aborted (as libzmq did on EMFILE) the test run itself would have died.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from execengine.rpc import Channel, RpcServer, connection

PEER = Path(__file__).with_name("_hostile_peer.py")
REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # ``sandbox`` is a top-level folder, not an installed package
    sys.path.insert(0, str(REPO))

from sandbox import zmtp  # noqa: E402  (the child runtime's ZMTP client)

#: frames of the fuzz run (the issue asks for at least 100,000)
FUZZ_FRAMES = 100_000


def echo(tool: str, args: dict) -> str:
    # ensure_ascii=False: a surrogate in the arguments reaches the result text as it is
    return json.dumps({"tool": tool, "args": args}, ensure_ascii=False)


@pytest.fixture
def server() -> Iterator[RpcServer]:
    srv = RpcServer(max_workers=16, max_parallel_calls=8, max_message_bytes=1 << 20,
                    max_connections=32)
    try:
        yield srv
    finally:
        srv.close()


def open_channel(server: RpcServer, *, budget: int = 10**6) -> Channel:
    token = secrets.token_hex(32)
    ch = server.open(exec_id=secrets.token_hex(8), token=token, allowed=["echo"],
                     handler=echo, max_tool_calls=budget)
    ch.test_token = token  # type: ignore[attr-defined]
    return ch


def peer(mode: str, ch: Channel, n: int = 0, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(PEER), mode, str(REPO), ch.socket_path,
         ch.test_token, ch.exec_id, str(n)],  # type: ignore[attr-defined]
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)  # type: ignore[call-overload]


def outcome(proc: subprocess.Popen[str], timeout: float = 50) -> dict:
    # closing stdin (when piped) tells a steady peer to stop and report
    out, err = proc.communicate(input="" if proc.stdin else None, timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def test_fuzz_of_100k_frames_while_another_execution_keeps_its_replies(server):
    victim, attacker = open_channel(server), open_channel(server)
    steady = peer("steady", victim, stdin=subprocess.PIPE)
    assert steady.stdout is not None and steady.stdout.readline().strip() == "ready"
    started = time.monotonic()
    fuzz = outcome(peer("fuzz", attacker, FUZZ_FRAMES), timeout=55)
    fuzz_seconds = time.monotonic() - started
    calm = outcome(steady)
    print(f"\nfuzz: {fuzz} in {fuzz_seconds:.1f} s; the other execution meanwhile: {calm}")
    assert fuzz["sent"] == fuzz["replies"] == FUZZ_FRAMES  # exactly one reply per frame
    assert fuzz["missing"] == []  # ... naming the request whenever it had a valid id
    assert fuzz["poison"] > 25_000 and fuzz["transport_dropped"] == FUZZ_FRAMES // 1000
    assert calm["calls"] > 10 and calm["p99_ms"] < 2000
    assert server.restarts == 0
    victim.close()
    attacker.close()


@pytest.mark.parametrize("frame", [
    b"[" * 5000 + b"]" * 5000,
    b'{"v":1,"type":"hello","exec":"' + b"\\ud800" + b'","token":"x"}',
    b'{"v":1,"type":"call","id":"\\ud800","tool":"\\udc00"}',
])
def test_poison_before_the_hello_is_denied_and_the_loop_goes_on(server, frame):
    ch = open_channel(server)
    with zmtp.connect(ch.socket_path) as conn:
        conn.send(frame)
        assert json.loads(conn.recv()[0])["type"] == "denied"
    with zmtp.connect(ch.socket_path) as conn:
        conn.send(json.dumps({"v": 1, "type": "hello", "exec": ch.exec_id,
                              "token": ch.test_token}).encode())  # type: ignore[attr-defined]
        assert json.loads(conn.recv()[0])["type"] == "welcome"
        conn.send(b'{"v":1,"type":"call","id":"1","tool":"echo","args":{"f":"\\udcff"}}')
        reply = json.loads(conn.recv()[0])
        assert reply["id"] == "1" and json.loads(reply["result"])["args"] == {"f": "\udcff"}
    assert server.restarts == 0
    ch.close()


def test_messages_dribbled_over_many_connections_at_once_reach_each_its_own(server):
    """The loop reads every connection into one buffer it keeps: 8 connections of 4
    executions send their hello and 30 calls (some past a short frame's 255 bytes) in
    pieces of 1-9 bytes, taking turns; each execution gets exactly its own replies (in any
    order: an execution's calls run concurrently)."""
    from execengine.rpc import connection as host_zmtp

    rng = random.Random(7)
    with contextlib.ExitStack() as stack:
        channels = [stack.enter_context(open_channel(server)) for _ in range(4)]
        conns = [(k, channels[k // 2],
                  stack.enter_context(zmtp.connect(channels[k // 2].socket_path)))
                 for k in range(8)]
        pending = []
        for k, ch, _ in conns:
            data = host_zmtp.frame(json.dumps({
                "v": 1, "type": "hello", "exec": ch.exec_id,
                "token": ch.test_token}).encode())  # type: ignore[attr-defined]
            for i in range(30):
                data += host_zmtp.frame(json.dumps({
                    "v": 1, "type": "call", "id": f"{k}-{i}", "tool": "echo",
                    "args": {"conn": k, "exec": ch.exec_id, "pad": "x" * rng.randrange(400)}}
                ).encode())
            pending.append(memoryview(data))
        while any(pending):
            for k, (_, _, conn) in enumerate(conns):
                n = rng.randint(1, 9)
                piece, pending[k] = pending[k][:n], pending[k][n:]
                if piece:
                    conn._sock.sendall(piece)
            if rng.random() < 0.05:
                time.sleep(0.001)  # the loop reads what came so far
        for k, ch, conn in conns:
            assert json.loads(conn.recv()[0])["type"] == "welcome"
            got = sorted((json.loads(conn.recv()[0]) for _ in range(30)),
                         key=lambda r: int(r["id"].partition("-")[2]))
            assert [r["id"] for r in got] == [f"{k}-{i}" for i in range(30)]
            for r in got:
                args = json.loads(r["result"])["args"]
                assert (args["conn"], args["exec"]) == (k, ch.exec_id)
    assert server.restarts == 0


def test_a_failing_loop_is_restarted_at_once(server, monkeypatch):
    ch = open_channel(server)
    real = RpcServer._housekeeping
    failures = []

    def crash_once(self: RpcServer, now: float) -> None:
        if not failures:
            failures.append(now)
            raise RuntimeError("injected bug")
        real(self, now)

    monkeypatch.setattr(RpcServer, "_housekeeping", crash_once)
    deadline = time.monotonic() + 5
    while not server.restarts:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    t0 = time.monotonic()
    with zmtp.connect(ch.socket_path) as conn:
        conn.send(json.dumps({"v": 1, "type": "hello", "exec": ch.exec_id,
                              "token": ch.test_token}).encode())  # type: ignore[attr-defined]
        assert json.loads(conn.recv()[0])["type"] == "welcome"
    assert time.monotonic() - t0 < 2  # served by the restarted loop, no 10 s hang
    ch.close()


def test_open_starts_a_new_loop_thread_when_it_is_gone(server):
    ch = open_channel(server)
    thread = server._thread
    assert thread is not None
    server._stopping = True  # make the loop thread end, as a thread killed by a bug would
    server._wake()
    thread.join(5)
    assert not thread.is_alive()
    server._stopping = False
    ch2 = open_channel(server)  # fails fast into a restart, no hang
    assert server._thread is not thread and server._thread.is_alive()
    with zmtp.connect(ch2.socket_path) as conn:
        conn.send(json.dumps({"v": 1, "type": "hello", "exec": ch2.exec_id,
                              "token": ch2.test_token}).encode())  # type: ignore[attr-defined]
        assert json.loads(conn.recv()[0])["type"] == "welcome"
    ch.close()
    ch2.close()


def test_late_reader_of_5000_pipelined_calls_loses_nothing(server):
    ch = open_channel(server)
    got = outcome(peer("late", ch, 5000))
    assert got == {"sent": 5000, "distinct_replies": 5000}
    ch.close()


def test_asyncio_burst_of_5000_calls_loses_nothing(server):
    ch = open_channel(server)
    got = outcome(peer("burst", ch, 5000))
    assert got == {"sent": 5000, "correct": 5000}
    assert ch.tool_calls_made == 5000
    ch.close()


def _greeted_hog(server, monkeypatch, hogs=1):
    """A channel and ``hogs`` connections to it that said hello (one, not a list, when 1),
    under a reply bound lowered to 256 KiB (read again below 64 KiB), for the tests of
    peers that do not read their replies."""
    monkeypatch.setattr(connection, "OUT_HIGH", 256 * 1024)
    monkeypatch.setattr(connection, "OUT_LOW", 64 * 1024)
    ch = open_channel(server)
    made = []
    for _ in range(hogs):
        hog = zmtp.connect(ch.socket_path)
        hog.send(json.dumps({"v": 1, "type": "hello", "exec": ch.exec_id,
                             "token": ch.test_token}).encode())  # type: ignore[attr-defined]
        hog.recv()
        made.append(hog)
    return ch, (made[0] if hogs == 1 else made)


def test_a_peer_that_never_reads_is_no_longer_read_and_others_go_on(server, monkeypatch):
    ch, hog = _greeted_hog(server, monkeypatch)
    big = {"pad": "x" * 20_000}
    sent: list[int] = []

    def flood() -> None:  # calls with big results, never reading; blocks once not read
        with contextlib.suppress(zmtp.ZmtpError):
            for n in range(1, 5000):
                hog.send(connection._dump({"v": 1, "type": "call", "id": str(n),
                                           "tool": "echo", "args": big}))
                sent.append(n)

    sender = threading.Thread(target=flood, daemon=True)
    sender.start()
    try:
        conns = [c for c in server._listeners[ch].conns if c.authed]
        assert len(conns) == 1
        hogged = conns[0]
        deadline = time.monotonic() + 30
        while hogged.reading and sender.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not hogged.reading  # the host stopped reading from the peer that never reads
        assert sender.is_alive() and len(sent) < 4999  # so its sends block
        assert hogged.queued_bytes < 64 * 1024 * 1024  # memory stays bounded
        other = open_channel(server)
        got = outcome(peer("late", other, 200))
        assert got["distinct_replies"] == 200  # another execution is served meanwhile
        assert not hogged.reading and not hogged.closed  # still connected, still not read
        other.close()
    finally:
        hog.close()  # wakes the blocked send
        sender.join(10)
    assert not sender.is_alive()
    ch.close()


@pytest.mark.parametrize("hogs", [1, 8])
def test_a_ping_flood_that_never_reads_its_pongs_meets_the_bound_at_its_real_memory(
        server, monkeypatch, hogs):
    """Each PING queues a 9-byte PONG; queued, each costs some 300 bytes of host memory.
    Counted by their bytes alone, the host read 30,000 PINGs under a 256 KiB bound (and
    4 GiB of RSS under the real 64 MiB one, in a red-team run) before it stopped reading;
    counted with their cost, it stops after about a thousand. The bound is the
    execution's: 8 connections flooding at once share it (each had its own, and went on
    answering what it had read already: 8 x 256 KiB and more)."""
    ch, made = _greeted_hog(server, monkeypatch, hogs)
    hog_list = [made] if hogs == 1 else made
    sent: list[int] = []

    def flood(hog) -> None:  # PINGs, never reading a PONG; blocks once not read
        with contextlib.suppress(zmtp.ZmtpError, OSError):
            for n in range(1, 200_000):
                hog.ping()
                sent.append(n)

    senders = [threading.Thread(target=flood, args=(h,), daemon=True) for h in hog_list]
    for t in senders:
        t.start()
    try:
        hogged = [c for c in server._listeners[ch].conns if c.authed]
        assert len(hogged) == hogs
        deadline = time.monotonic() + 60
        while (any(c.reading for c in hogged) and any(t.is_alive() for t in senders)
               and time.monotonic() < deadline):
            time.sleep(0.01)
        # what they had sent by then: what the host read, plus what the socket buffers hold
        stalled = len(sent)
        assert not any(c.reading for c in hogged) and stalled < 10_000 * hogs, stalled
        # past the shared bound by at most one reply per connection
        total = sum(c.queued_bytes for c in hogged)
        assert total <= 256 * 1024 + hogs * (connection.ENTRY_COST + 64), total
    finally:
        for hog in hog_list:
            hog.close()
        for t in senders:
            t.join(10)
    assert not any(t.is_alive() for t in senders)
    ch.close()


def test_connection_flood_is_capped_per_execution_and_the_host_survives(server):
    victim, attacker = open_channel(server), open_channel(server)
    steady = peer("steady", victim, stdin=subprocess.PIPE)
    assert steady.stdout is not None and steady.stdout.readline().strip() == "ready"
    flood = outcome(peer("flood", attacker, 3000))
    calm = outcome(steady)
    assert flood["opened"] + flood["connect_errors"] == 3000
    assert flood["connect_errors"] > 0  # the backlog filled: clients were told to wait
    assert flood["greeted"] <= server.max_connections  # never more than the cap at once
    assert attacker.refused_connections > 0
    assert calm["calls"] > 0
    deadline = time.monotonic() + 5
    while server.connections > 1:  # the attacker's connections all went away
        assert time.monotonic() < deadline, server.connections
        time.sleep(0.01)
    with zmtp.connect(attacker.socket_path) as conn:  # and it may connect again
        conn.send(json.dumps({"v": 1, "type": "hello", "exec": attacker.exec_id,
                              "token": attacker.test_token}).encode())  # type: ignore[attr-defined]
        assert json.loads(conn.recv()[0])["type"] == "welcome"
    victim.close()
    attacker.close()


def test_running_out_of_file_descriptors_pauses_accept_instead_of_aborting(server):
    ch = open_channel(server)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    server.max_connections = 10_000
    socks = [socket.socket(socket.AF_UNIX) for _ in range(200)]
    try:
        used = len(os.listdir("/proc/self/fd"))
        resource.setrlimit(resource.RLIMIT_NOFILE, (used + 20, hard))
        for s in socks:  # connects need no new descriptor here; the host's accepts do
            s.setblocking(False)
            with contextlib.suppress(BlockingIOError):  # a full backlog: it would wait
                s.connect(ch.socket_path)
        deadline = time.monotonic() + 5
        while not server._paused:
            assert time.monotonic() < deadline, "accept never ran short of descriptors"
            time.sleep(0.01)
        assert server._thread is not None and server._thread.is_alive()
    finally:
        for s in socks:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    with zmtp.connect(ch.socket_path) as conn:  # the paused listener serves again
        conn.send(json.dumps({"v": 1, "type": "hello", "exec": ch.exec_id,
                              "token": ch.test_token}).encode())  # type: ignore[attr-defined]
        assert json.loads(conn.recv()[0])["type"] == "welcome"
    assert server.restarts == 0
    ch.close()
