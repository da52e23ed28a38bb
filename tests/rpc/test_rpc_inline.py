"""Calls of fast tools run on the loop thread; a slow one hands the loop to the standby.

Each test sets the server's thresholds so that a scheduling delay on a loaded machine
cannot change where a call runs: ``inline_fast`` far above a no-op call's time, and
``handover`` far above it too unless the test is about a handover (then the call that
must be handed over blocks until the test releases it).
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time

import pytest

from execengine.rpc import connection as zmtp
from execengine.rpc import server as rpc_server


def _thread_of(peer, call_id: str, tool: str, args: dict | None = None) -> str:
    """The thread that ran one call (``peer``: the pyzmq Peer or a :class:`RawPeer`)."""
    peer.call(call_id, tool, args)
    reply = peer.recv()
    assert reply["id"] == call_id, reply
    return json.loads(reply["result"])["thread"]


def _handed_over(rpc) -> None:
    """Wait (10 s at most) for the standby to take the loop over, once."""
    deadline = time.monotonic() + 10
    while rpc.server.handovers == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert rpc.server.handovers == 1


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


class RawPeer:
    """A ZMTP peer on a plain socket: :meth:`calls` writes many calls in one ``sendall``,
    so the host finds them all in its next read."""

    def __init__(self, ch) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(ch.socket_path)
        self.buf = b""
        self.sock.sendall(zmtp.GREETING + zmtp.command(
            b"READY", b"\x0bSocket-Type" + struct.pack("!I", 6) + b"DEALER"))
        self._read(zmtp.GREETING_SIZE)
        self.buf = self.buf[zmtp.GREETING_SIZE:]
        self.calls([{"v": 1, "type": "hello", "exec": ch.exec_id, "token": ch.test_token}])
        assert self.recv()["type"] == "welcome"

    def _read(self, n: int) -> None:
        while len(self.buf) < n:
            data = self.sock.recv(65536)
            assert data, "the host closed the connection"
            self.buf += data

    def calls(self, messages: list[dict]) -> None:
        self.sock.sendall(b"".join(zmtp.frame(json.dumps(m).encode()) for m in messages))

    def call(self, call_id: str, tool: str, args: dict | None = None) -> None:
        self.calls([{"v": 1, "type": "call", "id": call_id, "tool": tool, "args": args or {}}])

    def recv(self) -> dict:
        while True:
            self._read(2)
            flags, size = self.buf[0], self.buf[1]
            assert not flags & 0x02, "only short frames here"
            self._read(2 + size)
            body, self.buf = self.buf[2:2 + size], self.buf[2 + size:]
            if not flags & 0x04:  # commands (READY, PING) are skipped
                return json.loads(body)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _burst_while_the_loop_is_busy(peer: RawPeer, tools: Tools, tool: str, n: int,
                                  stall: Tools | None = None) -> None:
    """Send ``n`` calls of ``tool`` (the first with ``{"wait": True}``) in one write while a
    call blocks the loop thread, so that the loop reads and dispatches them in one turn;
    then let the blocking call end. ``stall``: the handler of the blocking call (``tools``
    when None), which is a call of "block" ("stall" with ``stall``)."""
    blocker = stall or tools
    name = "stall" if stall else "block"
    peer.call("stalled", name, {"wait": True})
    assert blocker.blocked.wait(10)
    first = {"wait": True} if stall else {}
    peer.calls([{"v": 1, "type": "call", "id": f"burst{i}", "tool": tool,
                 "args": first if i == 0 else {}} for i in range(n)])
    blocker.release.set()
    assert peer.recv()["id"] == "stalled"


def _threads(peer: RawPeer, n: int) -> dict[str, str]:
    replies = [peer.recv() for _ in range(n)]
    return {r["id"]: json.loads(r["result"])["thread"] for r in replies}


def _raw_ready(rpc, handler, allowed=("fast", "block")) -> tuple[object, RawPeer]:
    rpc.server.inline_fast = 10.0
    rpc.server.handover = 30.0
    ch = rpc.open(allowed=allowed, handler=handler, max_tool_calls=5000)
    peer = RawPeer(ch)
    for tool in allowed:  # a tool's first call goes to a worker; then it runs on the loop
        assert _thread_of(peer, f"{tool}1", tool).startswith("execengine-tool")
        assert _thread_of(peer, f"{tool}2", tool) == "execengine-rpc"
    return ch, peer


@pytest.mark.parametrize("turn", [30.0, 0.0])
def test_a_burst_of_fast_calls_runs_on_the_loop_thread_for_the_turns_share(rpc, turn):
    # a script's gathered calls of a fast tool, more than its max_parallel_calls (4 here):
    # the loop runs them itself, no hop to a worker, until the turn's share is spent (at
    # once with 0); the rest goes to workers, so other connections wait no longer than that
    tools = Tools()
    ch, peer = _raw_ready(rpc, tools)
    rpc.server.inline_turn = turn
    with ch, peer:
        _burst_while_the_loop_is_busy(peer, tools, "fast", 20)
        threads = _threads(peer, 20)
        on_loop = {i for i in range(20) if threads[f"burst{i}"] == "execengine-rpc"}
        assert on_loop == (set(range(20)) if turn else {0}), threads
        assert all(threads[f"burst{i}"].startswith("execengine-tool")
                   for i in set(range(20)) - on_loop), threads


def test_held_calls_of_a_tool_handed_over_go_to_the_pool(rpc):
    # a burst of one tool's calls is held; the first blocks and the loop is handed over:
    # the new loop does not run the calls of that tool held behind it
    stall, tools = Tools(), Tools()

    def handler(tool: str, args: dict) -> str:
        return stall("block", args) if tool == "stall" else tools(tool, args)

    ch, peer = _raw_ready(rpc, handler, allowed=("stall", "block"))
    rpc.server.inline_turn = 30.0
    with ch, peer:
        _burst_while_the_loop_is_busy(peer, tools, "block", 4, stall=stall)
        assert tools.blocked.wait(10)  # burst0 blocks the loop now
        rpc.server.handover = rpc_server.HANDOVER
        _handed_over(rpc)
        rest = _threads(peer, 3)  # answered while burst0 still blocks
        assert all(n.startswith("execengine-tool") for n in rest.values()), rest
        tools.release.set()
        assert peer.recv()["id"] == "burst0"


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
        _handed_over(rpc)
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


@pytest.mark.parametrize(("fast", "turn", "on_loop"), [
    (0.05, rpc_server.INLINE_TURN, 1),  # after the first, the tool is slow: the rest to workers
    (1e9, rpc_server.INLINE_TURN, 1),  # counted as fast: the turn's share ends with the first
    (1e9, 1e9, 10),  # negative control: no share, no speed check: each call holds the loop
], ids=["slow", "share", "control"])
def test_a_hostile_burst_of_slow_calls_holds_the_loop_for_one_call(rpc, fast, turn, on_loop):
    # a script sends ten 60 ms calls of a tool that was fast, in one write: whatever the
    # tool counts as, the loop (so every other execution) waits for one of them, not ten
    def tool(name: str, args: dict) -> str:
        time.sleep(args.get("sleep", 0))
        return json.dumps({"thread": threading.current_thread().name})

    ch, peer = _raw_ready(rpc, tool, allowed=("t",))
    rpc.server.inline_fast, rpc.server.inline_turn = fast, turn
    with ch, peer:
        peer.calls([{"v": 1, "type": "call", "id": f"s{i}", "tool": "t",
                     "args": {"sleep": 0.06}} for i in range(10)])
        threads = _threads(peer, 10)
        assert sum(n == "execengine-rpc" for n in threads.values()) == on_loop, threads


def test_a_standby_that_cannot_start_sends_the_call_to_a_worker(rpc, monkeypatch):
    # the host at its thread limit when a call would first run on the loop: without a
    # standby nothing could take the loop over from it, so a worker runs it; once threads
    # start again, calls run on the loop with a standby that does take over
    refused: list[str] = []
    start = threading.Thread.start

    def flaky(self):
        if self.name == "execengine-rpc-standby" and not refused:
            refused.append(self.name)
            raise RuntimeError("can't start new thread")
        return start(self)

    tools = Tools()
    ch, peer = _ready(rpc, tools)
    with ch:
        assert _thread_of(peer, "1", "block").startswith("execengine-tool")
        monkeypatch.setattr(threading.Thread, "start", flaky)
        assert _thread_of(peer, "2", "block").startswith("execengine-tool")
        assert refused and peer.silent()  # answered once, by a worker
        assert _thread_of(peer, "3", "block") == "execengine-rpc"
        rpc.server.handover = rpc_server.HANDOVER
        peer.call("4", "block", {"wait": True})
        assert tools.blocked.wait(10)
        _handed_over(rpc)
        tools.release.set()
        assert peer.recv()["id"] == "4"


def _polls_after_calls(rpc, tools: Tools, calls: int = 50) -> int:
    """The loop's polls for a next message once it has answered up to ``calls`` calls (it
    stops calling once the loop has polled: the window may pass before the loop's next
    turn on a loaded machine, so one call is not enough to show it)."""
    ch, peer = _ready(rpc, tools)
    with ch:
        for i in range(calls):
            assert _thread_of(peer, str(i), "fast")
            deadline = time.monotonic() + 0.2
            while rpc.server.polls == 0 and time.monotonic() < deadline:
                time.sleep(0.001)
            if rpc.server.polls:
                break
    return rpc.server.polls


def test_after_a_message_the_loop_polls_for_the_next_before_it_sleeps(rpc):
    rpc.server.spin = 0.01
    assert _polls_after_calls(rpc, Tools()) > 0


def test_with_spin_0_the_loop_sleeps_between_messages(rpc):
    rpc.server.spin = 0.0
    assert _polls_after_calls(rpc, Tools(), calls=5) == 0


def test_the_loop_does_not_poll_when_executions_could_use_every_cpu(rpc):
    # one execution open on a host with one CPU: the script needs it, the loop sleeps
    rpc.server.spin = 0.01
    rpc.server._cpus = 1
    assert _polls_after_calls(rpc, Tools(), calls=5) == 0
