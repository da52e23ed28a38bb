from __future__ import annotations

import json
import os
import stat
import threading
import time

import pytest

from execengine.errors import TransportError
from execengine.rpc.channel import make_socket_dir


def test_hello_then_call_round_trip(rpc):
    with rpc.open() as ch:
        mode = stat.S_IMODE(os.stat(ch.socket_dir).st_mode)
        assert mode == 0o700
        assert os.path.exists(ch.socket_path)
        p = rpc.peer(ch)
        assert p.hello(ch.exec_id, ch.test_token) == {
            "v": 1, "type": "welcome", "exec": ch.exec_id, "max_tool_calls": 50,
            "max_message_bytes": 1 << 20}
        assert ch.hello.is_set()
        p.call("1", "echo", {"x": "é"})
        reply = p.recv()
        assert reply["id"] == "1" and reply["type"] == "result"
        assert json.loads(reply["result"]) == {"tool": "echo", "args": {"x": "é"}}
        assert ch.tool_calls_made == 1
    assert not os.path.exists(ch.socket_dir)


@pytest.mark.parametrize("first", [
    {"v": 1, "type": "hello", "exec": "WRONG", "token": "x"},
    {"v": 1, "type": "call", "id": "1", "tool": "echo"},
    b"garbage",
])
def test_bad_or_missing_hello_is_denied_and_nothing_dispatched(rpc, first):
    with rpc.open() as ch:
        p = rpc.peer(ch)
        p.send(first)
        assert p.recv()["type"] == "denied"
        # a correct hello afterwards is ignored: the peer is forgotten for good
        p.send({"v": 1, "type": "hello", "exec": ch.exec_id, "token": ch.test_token})
        p.call("2", "echo")
        assert p.silent()
        assert rpc.calls == [] and not ch.hello.is_set()


def test_wrong_token_same_length(rpc):
    with rpc.open() as ch:
        p = rpc.peer(ch)
        bad = ("0" if ch.test_token[0] != "0" else "1") + ch.test_token[1:]
        assert p.hello(ch.exec_id, bad)["type"] == "denied"
        p.call("1", "echo")
        assert p.silent() and rpc.calls == []


def test_garbage_after_hello_is_answered_and_server_keeps_serving(rpc):
    with rpc.open() as ch:
        p = rpc.peer(ch)
        p.hello(ch.exec_id, ch.test_token)
        for junk in (b"\x00\xff", b"{", b"[]", b'{"v":1,"type":"nope"}',
                     b'{"v":1,"type":"call","id":"5","tool":"echo","args":"str"}'):
            p.send(junk)
            reply = p.recv()
            assert reply["type"] == "error", junk
        assert reply["id"] == "5"
        p.sock.send_multipart([b"a", b"b"])  # two frames
        assert p.recv()["type"] == "error"
        p.call("6", "echo")
        assert p.recv()["id"] == "6"
        assert len(rpc.calls) == 1


def test_oversized_message_drops_only_that_peer(rpc):
    with rpc.open() as ch:
        big = rpc.peer(ch)
        big.hello(ch.exec_id, ch.test_token)
        big.call("1", "echo", {"x": "a" * (2 << 20)})
        assert big.silent(0.5)
        good = rpc.peer(ch)
        good.hello(ch.exec_id, ch.test_token)
        good.call("2", "echo", {"x": "a" * 70_000})  # > 64 KB, under the limit
        assert good.recv()["id"] == "2"


def test_disallowed_tool_and_budget_are_results(rpc):
    with rpc.open(max_tool_calls=2) as ch:
        p = rpc.peer(ch)
        p.hello(ch.exec_id, ch.test_token)
        p.call("a", "execute_code")
        r = json.loads(p.recv()["result"])
        assert r == {"error": "Tool 'execute_code' is not available in execute_code. "
                              "Available: boom, echo, sleep"}
        for i in range(3):
            p.call(str(i), "echo")
        texts = sorted(p.recv()["result"] for _ in range(3))
        assert json.loads(texts[0]) == {"error": "Tool call limit reached (2). No more tool "
                                        "calls allowed in this execution."}
        assert ch.tool_calls_made == 2


def test_handler_exception_becomes_error_result(rpc):
    with rpc.open() as ch:
        p = rpc.peer(ch)
        p.hello(ch.exec_id, ch.test_token)
        p.call("1", "boom")
        assert "kaboom" in json.loads(p.recv()["result"])["error"]


def test_concurrent_calls_run_in_parallel_and_match_ids(rpc):
    with rpc.open(max_tool_calls=100) as ch:
        p = rpc.peer(ch)
        p.hello(ch.exec_id, ch.test_token)
        t0 = time.monotonic()
        for i in range(16):
            p.call(f"c{i}", "sleep", {"s": 0.3, "i": i})
        replies = [p.recv() for _ in range(16)]
        elapsed = time.monotonic() - t0
        for r in replies:
            assert json.loads(r["result"])["args"]["i"] == int(r["id"][1:])
        # 16 calls of 0.3 s, 4 at a time per execution: four rounds, not sixteen
        assert elapsed < 16 * 0.3 / 2


def test_budget_is_atomic_across_peers(rpc):
    with rpc.open(max_tool_calls=10) as ch:
        peers = [rpc.peer(ch) for _ in range(4)]
        for p in peers:
            p.hello(ch.exec_id, ch.test_token)
        for p in peers:
            for i in range(5):
                p.call(str(i), "echo")
        results = [json.loads(p.recv()["result"]) for p in peers for _ in range(5)]
        assert sum("error" not in r for r in results) == 10
        assert ch.tool_calls_made == 10 and len(rpc.calls) == 10


def test_many_channels_share_one_loop(rpc):
    chans = [rpc.open() for _ in range(5)]
    try:
        peers = [rpc.peer(c) for c in chans]
        for c, p in zip(chans, peers, strict=True):
            p.hello(c.exec_id, c.test_token)
        # one channel's token does not open another
        stranger = rpc.peer(chans[0])
        assert stranger.hello(chans[1].exec_id, chans[1].test_token)["type"] == "denied"
        for i, p in enumerate(peers):
            p.call(str(i), "echo", {"n": i})
        for i, p in enumerate(peers):
            assert json.loads(p.recv()["result"])["args"] == {"n": i}
    finally:
        for c in chans:
            c.close()


def test_reply_after_close_is_dropped_and_peer_gone_is_harmless(rpc):
    release = threading.Event()

    def handler(tool, args):
        release.wait(5)
        return "{}"

    ch = rpc.open(handler=handler)
    p = rpc.peer(ch)
    p.hello(ch.exec_id, ch.test_token)
    p.call("1", "echo")
    p.close()  # the peer vanishes with a call in flight
    time.sleep(0.05)
    release.set()
    time.sleep(0.05)
    ch.close()
    ch.close()  # idempotent
    ch2 = rpc.open()
    p2 = rpc.peer(ch2)
    assert p2.hello(ch2.exec_id, ch2.test_token)["type"] == "welcome"
    ch2.close()


def test_socket_path_limit(tmp_path):
    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    with pytest.raises(TransportError, match="longer than the platform limit"):
        make_socket_dir(str(deep))


def test_server_close_is_idempotent_and_refuses_new_channels(rpc):
    rpc.server.close()
    rpc.server.close()
    with pytest.raises(TransportError):
        rpc.open()


def test_ping_ignored_by_zmq_layer(rpc):
    # A ZMTP-level heartbeat does not disturb the application protocol, and the host
    # answers it: the peer PINGs every 20 ms (set before connecting, so it applies) and
    # drops the connection when no PONG comes within 100 ms; it would then reconnect as a
    # new, unauthenticated peer and its call would be refused.
    with rpc.open() as ch:
        p = rpc.peer(ch, HEARTBEAT_IVL=20, HEARTBEAT_TIMEOUT=100)
        assert p.hello(ch.exec_id, ch.test_token)["type"] == "welcome"
        time.sleep(0.4)  # twenty heartbeat rounds, not a race being ordered
        p.call("1", "echo")
        reply = p.recv()
        assert reply["id"] == "1" and reply["type"] == "result"


def test_closing_the_server_ends_the_channels_left_open_and_removes_their_folders(rpc):
    ch = rpc.open()
    folder = ch.socket_dir
    assert os.path.isdir(folder) and not ch.closed
    rpc.server.close()
    assert ch.closed and not os.path.exists(folder)
