"""Leader and standby: the thread that read a call runs it (no hop to a pool worker), and
every guarantee of the pool still holds for such calls."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from execengine.rpc import RpcServer


def _names(rpc: Any) -> tuple[list[str], Any]:
    """A handler recording the name of the thread each call ran on."""
    names: list[str] = []

    def handler(tool: str, args: dict) -> str:
        names.append(threading.current_thread().name)
        return rpc.handler(tool, args)
    return names, handler


def test_a_lone_call_runs_on_the_thread_that_read_it(rpc):
    names, handler = _names(rpc)
    ch = rpc.open(handler=handler)
    p = rpc.peer(ch)
    p.hello(ch.exec_id, ch.test_token)
    for i in range(20):  # one at a time, as a script's synchronous calls come
        p.call(str(i), "echo", {"i": i})
        assert p.recv()["id"] == str(i)
    assert rpc.server.inline_calls >= 15  # (the standby may not be waiting yet, now and then)
    assert names.count("execengine-rpc") == rpc.server.inline_calls
    ch.close()


def test_a_hung_call_run_inline_leaves_the_standby_leading(rpc):
    release = threading.Event()
    entered = threading.Event()

    def handler(tool: str, args: dict) -> str:
        if tool == "sleep":  # the first call hangs on the loop thread that read it
            entered.set()
            release.wait(20)
        return json.dumps({"tool": tool})

    ch = rpc.open(handler=handler)
    p = rpc.peer(ch)
    p.hello(ch.exec_id, ch.test_token)
    p.call("hung", "sleep")
    assert entered.wait(5)
    assert rpc.server.inline_calls == 1
    other = rpc.open()
    q = rpc.peer(other)
    assert q.hello(other.exec_id, other.test_token)["type"] == "welcome"
    for i in range(10):  # served by the standby (now leading) and the pool
        q.call(str(i), "echo")
    assert sorted(int(q.recv()["id"]) for _ in range(10)) == list(range(10))
    assert rpc.server.inline_calls == 1  # nobody stood by: the rest went to the pool
    release.set()
    assert p.recv()["id"] == "hung"
    ch.close()
    other.close()


def test_closing_the_server_does_not_wait_for_a_hung_inline_call(rpc):
    release = threading.Event()
    entered = threading.Event()
    server = RpcServer(max_workers=2)

    def handler(tool: str, args: dict) -> str:
        entered.set()
        release.wait(20)
        return "{}"

    try:
        ch = server.open(exec_id="e", token="t" * 8, allowed=["x"], handler=handler,
                         max_tool_calls=5)
        p = rpc.peer(ch)
        p.hello("e", "t" * 8)
        p.call("1", "x")
        assert entered.wait(5)
        t0 = time.monotonic()
        server.close()
        assert time.monotonic() - t0 < 2.0
    finally:
        release.set()
        server.close()


def test_a_call_kept_when_the_loop_fails_is_answered_once_by_the_pool(rpc, monkeypatch):
    names, handler = _names(rpc)
    real = RpcServer._guarded
    failed: list[bool] = []

    def fail_after_keeping(self: RpcServer, conn: Any, mask: int) -> None:
        real(self, conn, mask)
        if self._inline is not None and not failed:
            failed.append(True)
            raise RuntimeError("injected bug")

    monkeypatch.setattr(RpcServer, "_guarded", fail_after_keeping)
    ch = rpc.open(handler=handler)
    p = rpc.peer(ch)
    p.hello(ch.exec_id, ch.test_token)
    p.call("1", "echo")
    assert p.recv()["id"] == "1"
    assert p.silent(0.3)  # exactly one reply
    assert failed and rpc.server.restarts == 1
    assert names[0].startswith("execengine-tool")  # run by the pool instead
    p.call("2", "echo")
    assert p.recv()["id"] == "2"  # the restarted loop serves on
    ch.close()


def test_many_concurrent_callers_get_exactly_their_replies(rpc):
    """Pipelined calls from many peers of several executions, inline and pooled mixed:
    one reply per call, each on the connection that made it, none lost or repeated."""
    channels = [rpc.open(max_tool_calls=1000) for _ in range(3)]
    peers = []
    for ch in channels:
        for _ in range(4):
            p = rpc.peer(ch)
            assert p.hello(ch.exec_id, ch.test_token)["type"] == "welcome"
            peers.append(p)
    for k, p in enumerate(peers):
        for i in range(40):
            p.call(f"{k}-{i}", "echo", {"k": k, "i": i})
    for k, p in enumerate(peers):
        got = [p.recv() for _ in range(40)]
        assert sorted(r["id"] for r in got) == sorted(f"{k}-{i}" for i in range(40))
        assert all(json.loads(r["result"])["args"]["k"] == k for r in got)
        assert p.silent(0.05)
    assert rpc.server.inline_calls > 0
    for ch in channels:
        ch.close()
