"""Calls of fast tools run on the loop thread; a slow one hands the loop to the standby.

Each test sets the server's thresholds so that a scheduling delay on a loaded machine
cannot change where a call runs: ``inline_fast`` far above a no-op call's time, and
``handover`` far above it too unless the test is about a handover (then the call that
must be handed over blocks until the test releases it).
"""

from __future__ import annotations

import json
import threading
import time

from execengine.rpc import server as rpc_server


def _thread_of(peer, call_id: str, tool: str, args: dict | None = None) -> str:
    peer.call(call_id, tool, args)
    reply = peer.recv()
    assert reply["id"] == call_id, reply
    return json.loads(reply["result"])["thread"]


class Tools:
    """A handler that says which thread ran each call; ``block`` waits for ``release``."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.blocked = threading.Event()

    def __call__(self, tool: str, args: dict) -> str:
        if args.get("sleep"):
            time.sleep(args["sleep"])
        if args.get("exit"):
            raise SystemExit(3)
        if tool == "block" and args.get("wait"):
            self.blocked.set()
            self.release.wait(30)
        return json.dumps({"thread": threading.current_thread().name})


def _ready(rpc, tools: Tools, allowed=("fast", "block")):
    rpc.server.inline_fast = 0.1
    rpc.server.handover = 30.0
    ch = rpc.open(allowed=allowed, handler=tools, max_tool_calls=5000)
    peer = rpc.peer(ch)
    assert peer.hello(ch.exec_id, ch.test_token)["type"] == "welcome"
    return ch, peer


def test_a_fast_tools_calls_run_on_the_loop_thread(rpc):
    tools = Tools()
    ch, peer = _ready(rpc, tools)
    with ch:
        # the first call of a tool not seen yet goes to a worker; once it proved fast, the
        # loop runs the tool's calls itself
        assert _thread_of(peer, "1", "fast").startswith("execengine-tool")
        assert {_thread_of(peer, str(i), "fast") for i in range(2, 40)} == {"execengine-rpc"}


def test_a_slow_call_in_the_pool_keeps_only_the_next_call_there(rpc):
    # a slow call on a worker (a first call's warm-up, say) is not held against the tool
    tools = Tools()
    ch, peer = _ready(rpc, tools)
    with ch:
        assert _thread_of(peer, "1", "fast", {"sleep": 0.2}).startswith("execengine-tool")
        assert _thread_of(peer, "2", "fast").startswith("execengine-tool")
        assert _thread_of(peer, "3", "fast") == "execengine-rpc"
        # over inline_fast, under handover: still on the loop, the next one in the pool
        assert _thread_of(peer, "4", "fast", {"sleep": 0.2}) == "execengine-rpc"
        assert _thread_of(peer, "5", "fast").startswith("execengine-tool")
        assert _thread_of(peer, "6", "fast") == "execengine-rpc"
        assert rpc.server.handovers == 0


def test_inline_calls_can_be_turned_off(rpc):
    rpc.server.inline_calls = False
    tools = Tools()
    ch, peer = _ready(rpc, tools)
    with ch:
        names = {_thread_of(peer, str(i), "fast") for i in range(20)}
        assert all(n.startswith("execengine-tool") for n in names), names


def test_a_slow_call_on_the_loop_hands_the_loop_over(rpc):
    # a tool fast so far blocks in one call: within HANDOVER the standby takes the loop
    # over, so other executions are served while it blocks; the tool then goes to the pool
    tools = Tools()
    ch, peer = _ready(rpc, tools)
    other_tools = Tools()
    other, other_peer = _ready(rpc, other_tools)
    with ch, other:
        assert _thread_of(peer, "1", "block").startswith("execengine-tool")
        assert _thread_of(peer, "2", "block") == "execengine-rpc"
        rpc.server.handover = rpc_server.HANDOVER
        peer.call("3", "block", {"wait": True})
        assert tools.blocked.wait(10)
        deadline = time.monotonic() + 10
        while rpc.server.handovers == 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert rpc.server.handovers == 1
        rpc.server.handover = 30.0  # no second handover from a slow machine below
        # served by the thread that took the loop over, while call 3 still blocks
        for i in range(5):
            assert _thread_of(other_peer, f"o{i}", "fast") != ""
        assert not tools.release.is_set()
        tools.release.set()
        assert peer.recv()["id"] == "3"
        # slow for good: the tool's calls go to the pool now; the other tool stays inline
        assert _thread_of(peer, "4", "block").startswith("execengine-tool")
        assert _thread_of(other_peer, "o9", "fast") == "execengine-rpc-standby"


def test_a_hung_call_on_the_loop_does_not_hold_up_close(rpc):
    tools = Tools()
    ch, peer = _ready(rpc, tools)
    _thread_of(peer, "1", "block")
    assert _thread_of(peer, "2", "block") == "execengine-rpc"
    peer.call("3", "block", {"wait": True})
    assert tools.blocked.wait(10)
    try:
        t0 = time.monotonic()
        ch.close()
        rpc.server.close()
        assert time.monotonic() - t0 < 2.0
    finally:
        tools.release.set()


def _switches(thread: threading.Thread) -> int:
    with open(f"/proc/self/task/{thread.native_id}/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["voluntary_ctxt_switches"]) + int(fields["nonvoluntary_ctxt_switches"])


def test_the_standby_polls_only_while_calls_run_inline(rpc):
    tools = Tools()
    ch, peer = _ready(rpc, tools)
    with ch:
        _thread_of(peer, "0", "fast")
        standby = None
        t0 = time.monotonic()
        for i in range(1, 1000):  # keep the loop busy with inline calls for a while
            _thread_of(peer, str(i), "fast")
            standby = standby or next((t for t in threading.enumerate()
                                       if t.name == "execengine-rpc-standby"), None)
            if time.monotonic() - t0 > 0.3:
                break
        assert standby is not None
        # while hot it wakes every STANDBY_POLL; after STANDBY_COOL it sleeps until woken.
        # Which thread is the standby now: a call slowed past HANDOVER by a loaded machine
        # swaps the roles, so the thread found above may own the loop, or have ended.
        time.sleep(rpc_server.STANDBY_COOL + 0.1)
        deadline = time.monotonic() + 5  # a loaded machine may run it late
        while not rpc.server._standby_asleep and time.monotonic() < deadline:
            time.sleep(0.01)
        standby = rpc.server._standby
        assert standby is not None and rpc.server._standby_asleep
        before = _switches(standby)
        time.sleep(0.5)
        assert _switches(standby) - before <= 1
        assert standby.is_alive()


def test_a_tool_raising_system_exit_gets_an_error_reply_on_either_thread(rpc):
    tools = Tools()
    ch, peer = _ready(rpc, tools)
    with ch:
        for i in range(2):  # the tool's first call runs in the pool, the second inline
            peer.call(f"x{i}", "fast", {"exit": True})
            reply = peer.recv()
            assert reply["id"] == f"x{i}"
            assert json.loads(reply["result"]) == {
                "error": "Tool execution failed: SystemExit: 3"}
            assert _thread_of(peer, f"y{i}", "fast") == "execengine-rpc"
        assert rpc.server.restarts == 0
