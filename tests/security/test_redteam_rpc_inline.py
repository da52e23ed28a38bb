"""Red team: a script (and its tools) against the RPC server's loop-thread fast path.

The fast path runs a call of a tool whose last call was fast on the loop thread; a standby
thread takes the loop over from a call running past ``handover``. What must hold whatever
the calls do: every call gets exactly one reply, and no call stalls the loop (so other
executions) for longer than the handover bound.

Thresholds are pinned on the server instance (as in tests/rpc/test_rpc_inline.py), and
blocking calls wait on events the test releases, so a loaded machine cannot change where
a call runs or which thread sees what.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from execengine.rpc import server as rpc_server


class Gates:
    """Tools that say which thread ran them; ``{"wait": True}`` blocks on the tool's gate."""

    def __init__(self, *names: str) -> None:
        self.release = {n: threading.Event() for n in names}
        self.blocked = {n: threading.Event() for n in names}
        self.threads: dict[str, str] = {}

    def __call__(self, tool: str, args: dict) -> str:
        if args.get("wait"):
            self.threads[tool] = threading.current_thread().name
            self.blocked[tool].set()
            self.release[tool].wait(30)
        return json.dumps({"thread": threading.current_thread().name})

    def open_all(self) -> None:
        for event in self.release.values():
            event.set()


def _ready(rpc, tools, allowed):
    ch = rpc.open(allowed=allowed, handler=tools, max_tool_calls=5000)
    peer = rpc.peer(ch)
    assert peer.hello(ch.exec_id, ch.test_token)["type"] == "welcome"
    return ch, peer


def _thread_of(peer, call_id: str, tool: str, args: dict | None = None) -> str:
    peer.call(call_id, tool, args)
    reply = peer.recv()
    assert reply["id"] == call_id, reply
    return json.loads(reply["result"])["thread"]


def _until(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.001)
    return True


def test_a_handed_over_call_ending_does_not_unwatch_the_next_inline_call(rpc):
    # Call a1 hangs on the loop: the standby takes the loop over. Call b1 then runs
    # inline on the new loop thread and hangs too. When a1 ends, its thread must not clear
    # the record of the call the loop runs now (b1), else nobody hands b1 over and every
    # other execution waits for b1 to end.
    server = rpc.server
    server.inline_fast, server.handover = 0.1, 30.0
    tools = Gates("a", "b")
    ch, peer = _ready(rpc, tools, ("a", "b"))
    other, other_peer = _ready(rpc, Gates(), ("a",))
    try:
        for tool in ("a", "b"):  # first call in the pool; once fast, on the loop
            _thread_of(peer, f"{tool}0", tool)
            assert _thread_of(peer, f"{tool}1", tool) == "execengine-rpc"
        first_loop = server._thread
        assert first_loop is not None
        server.handover = rpc_server.HANDOVER
        peer.call("a2", "a", {"wait": True})
        assert tools.blocked["a"].wait(10)
        assert _until(lambda: server.handovers == 1)
        server.handover = 30.0  # b2 must stay on the loop until a2 has ended
        peer.call("b2", "b", {"wait": True})
        assert tools.blocked["b"].wait(10)
        assert tools.threads["b"] == "execengine-rpc-standby"  # inline, on the new loop
        tools.release["a"].set()
        assert peer.recv()["id"] == "a2"
        first_loop.join(10)
        assert not first_loop.is_alive()
        # b2 has run on the loop for a while now: with the bound back, it is handed over
        server.handover = rpc_server.HANDOVER
        assert _until(lambda: server.handovers == 2, timeout=5.0), \
            "the loop stays stalled by b2: its inline call is no longer watched"
        assert _thread_of(other_peer, "o1", "a", {}) != ""
    finally:
        tools.open_all()
    with ch, other:
        assert peer.recv()["id"] == "b2"


def _alternate(rpc, rounds: int) -> int:
    """A script's calls of one tool alternating fast and slow (it picks the arguments):
    how many of the slow ones ran on the loop thread."""
    def tool(name: str, args: dict) -> str:
        if args.get("sleep"):
            time.sleep(args["sleep"])
        return json.dumps({"thread": threading.current_thread().name})

    ch, peer = _ready(rpc, tool, ("t",))
    with ch:
        _thread_of(peer, "warm", "t")
        on_loop = 0
        for i in range(rounds):
            _thread_of(peer, f"f{i}", "t")  # fast: in the pool, then the tool counts as fast
            if _thread_of(peer, f"s{i}", "t", {"sleep": 0.06}).startswith("execengine-rpc"):
                on_loop += 1
        return on_loop


@pytest.mark.parametrize(("share", "handover", "most"), [
    (0.0, 0.5, 9),  # a 0.5 s budget, not refilled: at most ceil(0.5 / 0.06) slow calls inline
    (1e9, 30.0, 20),  # negative control: an unlimited budget runs every slow call inline
], ids=["budget", "control"])
def test_alternating_fast_and_slow_calls_cannot_keep_the_loop_busy(rpc, share, handover, most):
    # each slow call (60 ms) stays under the handover bound, so none is ever handed over;
    # without a budget every one of them would hold the loop (and every other execution)
    server = rpc.server
    server.inline_fast, server.handover, server.overrun_share = 0.05, handover, share
    on_loop = _alternate(rpc, 20)
    if most == 20:
        assert on_loop == 20
    else:
        assert on_loop <= most


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise SystemExit(4)


@pytest.mark.parametrize("how", ["raises", "returns"])
def test_a_tool_error_that_cannot_be_printed_still_gets_one_reply_on_either_thread(rpc, how):
    # a tool raises (or returns, as its result) an object whose str() raises SystemExit:
    # the reply cannot say what it was, but the call must still be answered, the loop (for
    # an inline call) keep running, and the execution's next calls be served
    server = rpc.server
    server.inline_fast, server.handover = 0.1, 30.0

    def tool(name: str, args: dict) -> Any:
        if args.get("nasty"):
            if how == "raises":
                raise _Unprintable()
            return _Unprintable()
        return json.dumps({"thread": threading.current_thread().name})

    ch, peer = _ready(rpc, tool, ("t",))
    with ch:
        _thread_of(peer, "warm", "t")  # the first call in the pool; then the tool is fast
        for i in range(2):  # on the loop thread
            peer.call(f"x{i}", "t", {"nasty": True})
            reply = peer.recv()
            assert reply["id"] == f"x{i}"
            assert "error" in json.loads(reply["result"])
            assert _thread_of(peer, f"y{i}", "t") != ""
        server.inline_calls = False  # the same in the pool: the worker survives it
        for i in range(server._pool.max_workers + 2):
            peer.call(f"p{i}", "t", {"nasty": True})
            reply = peer.recv()
            assert reply["id"] == f"p{i}"
        assert _thread_of(peer, "last", "t").startswith("execengine-tool")
        assert server.restarts == 0
