"""Budget, queueing, refusal and result mapping through the in-memory transport.

The same Channel rules the socket server applies, with frames handed over as calls: no
socket, no child, milliseconds per test.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from execengine.errors import TransportError
from execengine.rpc.memory import MemoryServer


def _open(server, handler, *, allowed=("echo", "hang"), max_tool_calls=50):
    return server.open(exec_id="e1", token="t" * 64, allowed=allowed, handler=handler,
                       max_tool_calls=max_tool_calls)


def echo(tool, args):
    return json.dumps({"tool": tool, "args": args})


@pytest.fixture
def server():
    with MemoryServer(max_workers=8, max_parallel_calls=2) as s:
        yield s


def test_hello_then_calls_map_to_results(server):
    with _open(server, echo) as ch:
        peer = server.connect(ch.socket_path)
        welcome = peer.hello("e1", "t" * 64)
        assert welcome["type"] == "welcome" and welcome["max_tool_calls"] == 50
        assert ch.hello.is_set()
        assert peer.call("echo", {"x": 1}) == {"tool": "echo", "args": {"x": 1}}
        assert ch.tool_calls_made == 1


def test_bad_credentials_are_denied_and_then_ignored(server):
    with _open(server, echo) as ch:
        peer = server.connect(ch.socket_path)
        assert peer.hello("e1", "wrong")["type"] == "denied"
        assert not ch.hello.is_set()
        peer.start_call("1", "echo")
        assert peer.pending() == 0  # a denied peer gets nothing more
        other = server.connect(ch.socket_path)
        other.start_call("1", "echo")  # a call before the hello
        assert other.recv()["error"] == "the first message must be a hello"
        assert ch.tool_calls_made == 0


def test_garbage_frames_get_an_error_reply_and_the_peer_stays_usable(server):
    with _open(server, echo) as ch:
        peer = server.connect(ch.socket_path)
        peer.hello("e1", "t" * 64)
        for frame in (b"\xff\xfe", b"[]", b'{"v": 1, "type": "call", "id": 5}'):
            peer.send(frame)
            assert peer.recv()["type"] == "error"
        assert peer.call("echo") == {"tool": "echo", "args": {}}


def test_a_tool_not_allowed_is_refused_without_spending_budget(server):
    with _open(server, echo) as ch:
        peer = server.connect(ch.socket_path)
        peer.hello("e1", "t" * 64)
        out = peer.call("read_file", {"path": "x"})
        assert out == {"error": "Tool 'read_file' is not available in execute_code. "
                                "Available: echo, hang"}
        assert ch.tool_calls_made == 0


def test_budget_is_never_overrun_by_concurrent_calls(server):
    with _open(server, echo, max_tool_calls=3) as ch:
        peer = server.connect(ch.socket_path)
        peer.hello("e1", "t" * 64)
        for i in range(6):
            peer.start_call(str(i), "echo", {"i": i})
        replies = [peer.recv(id=str(i)) for i in range(6)]
        texts = [json.loads(r["result"]) for r in replies]
        limited = [t for t in texts if "error" in t]
        assert len(limited) == 3 and "limit reached (3)" in limited[0]["error"]
        assert ch.tool_calls_made == 3


def test_calls_beyond_the_per_execution_cap_wait_their_turn(server):
    gate = threading.Event()
    running, peak, lock = [0], [0], threading.Lock()

    def slow(tool, args):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        gate.wait(5)
        with lock:
            running[0] -= 1
        return json.dumps({"i": args["i"]})

    with _open(server, slow) as ch:
        peer = server.connect(ch.socket_path)
        peer.hello("e1", "t" * 64)
        for i in range(5):
            peer.start_call(str(i), "echo", {"i": i})
        deadline = time.monotonic() + 5
        while True:  # both handlers entered (not only dispatched to their workers)
            with lock:
                if running[0] == 2:
                    break
            assert time.monotonic() < deadline
            time.sleep(0.001)
        assert ch.running == 2 and ch.in_flight == 5  # 2 on workers, 3 waiting
        gate.set()
        got = sorted(json.loads(peer.recv(id=str(i))["result"])["i"] for i in range(5))
        assert got == [0, 1, 2, 3, 4] and peak[0] == 2
        assert ch.tool_calls_made == 5


def test_a_pool_held_by_abandoned_calls_refuses_at_once_and_gives_the_budget_back():
    release, entered = threading.Event(), threading.Event()

    def hang(tool, args):
        entered.set()
        release.wait(5)
        return "{}"

    server = MemoryServer(max_workers=1, max_parallel_calls=4)
    with server, server.open(exec_id="e2", token="u" * 64, allowed=["echo"], handler=echo,
                             max_tool_calls=5) as b:
        a = _open(server, hang)
        pa, pb = server.connect(a.socket_path), server.connect(b.socket_path)
        pa.hello("e1", "t" * 64)
        pb.hello("e2", "u" * 64)
        pa.start_call("h", "hang")
        assert entered.wait(5)
        deadline = time.monotonic() + 5
        a.close()  # its hung call is abandoned and holds the only worker
        out = pb.call("echo")
        assert "held by calls that never returned" in out["error"]
        assert b.tool_calls_made == 0  # refunded
        release.set()
        while server.pool.busy:
            assert time.monotonic() < deadline
            time.sleep(0.001)
        assert pb.call("echo") == {"tool": "echo", "args": {}}
        assert b.tool_calls_made == 1


def test_a_closed_channel_drops_waiting_calls_and_late_results(server):
    release = threading.Event()
    started = threading.Event()

    def hang(tool, args):
        started.set()
        release.wait(5)
        return "{}"

    ch = _open(server, hang)
    peer = server.connect(ch.socket_path)
    peer.hello("e1", "t" * 64)
    for i in range(4):
        peer.start_call(str(i), "hang")
    assert started.wait(5)
    ch.close()
    release.set()
    deadline = time.monotonic() + 5
    while server.pool.busy:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert peer.pending() == 0  # nothing is sent to the ended execution
    with pytest.raises(TransportError, match="nothing listens"):
        server.connect(ch.socket_path)
