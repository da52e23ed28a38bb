"""Hung tool calls: one execution's cannot starve another's; ended executions' are dropped."""

from __future__ import annotations

import json
import threading
import time

import pytest

from execengine.rpc import RpcServer
from execengine.rpc.pool import WorkerPool
from execengine.rpc.server import busy_message, waited_message


class Hang:
    """A handler whose ``hang`` tool blocks until released; counts entries per tool."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.entered: dict[str, int] = {}

    def __call__(self, tool: str, args: dict) -> str:
        with self.lock:
            self.entered[tool] = self.entered.get(tool, 0) + 1
        if tool == "hang":
            self.release.wait(20)
        return json.dumps({"tool": tool, "args": args})

    def wait_entered(self, tool: str, n: int) -> None:
        deadline = time.monotonic() + 5
        while self.entered.get(tool, 0) < n:
            assert time.monotonic() < deadline, self.entered
            time.sleep(0.01)


@pytest.fixture
def hang():
    h = Hang()
    yield h
    h.release.set()


def _wait_idle(server: RpcServer) -> None:
    deadline = time.monotonic() + 5
    while server._pool.busy:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_hung_calls_of_one_execution_leave_workers_for_another(rpc, hang):
    # the harness: 8 workers, at most 4 calls of one execution on them
    a = rpc.open(allowed=("hang", "echo"), handler=hang)
    pa = rpc.peer(a)
    pa.hello(a.exec_id, a.test_token)
    for i in range(6):
        pa.call(f"h{i}", "hang")
    hang.wait_entered("hang", 4)
    with rpc.open(allowed=("echo",), handler=hang) as b:
        pb = rpc.peer(b)
        pb.hello(b.exec_id, b.test_token)
        for i in range(6):
            pb.call(str(i), "echo", {"i": i})
        got = sorted(json.loads(pb.recv()["result"])["args"]["i"] for _ in range(6))
        assert got == list(range(6))
    assert a.running == 4 and a.tool_calls_made == 6  # two wait their turn, still counted
    a.close()  # the execution ends: waiting calls dropped, running ones abandoned
    hang.release.set()
    _wait_idle(rpc.server)
    assert hang.entered["hang"] == 4  # the two waiting calls never ran
    assert pa.silent(0.3)  # no late result was sent to the gone execution


@pytest.fixture
def small(rpc):
    """The harness over a server with 2 workers, at most 2 calls of one execution on them,
    and a queued call waiting at most 1 s for a worker."""
    server = RpcServer(max_workers=2, max_parallel_calls=2, max_wait=1.0)
    h = type(rpc)(server, rpc.ctx)
    try:
        yield h
    finally:
        for p in h.peers:
            p.close()
        server.close()


def test_a_pool_held_by_abandoned_calls_answers_at_once_with_an_error(small, hang):
    a = small.open(allowed=("hang",), handler=hang)
    pa = small.peer(a)
    pa.hello(a.exec_id, a.test_token)
    pa.call("1", "hang")
    pa.call("2", "hang")
    hang.wait_entered("hang", 2)
    a.close()  # its two hung calls are abandoned and hold both workers
    with small.open(allowed=("echo",), handler=hang) as b:
        pb = small.peer(b)
        pb.hello(b.exec_id, b.test_token)
        started = time.monotonic()
        pb.call("x", "echo")
        reply = pb.recv()
        assert time.monotonic() - started < 0.5  # at once, not after the bounded wait
        assert reply["id"] == "x"
        assert json.loads(reply["result"]) == {"error": busy_message(2)}
        assert b.tool_calls_made == 0  # refused calls do not use the budget
        hang.release.set()
        _wait_idle(small.server)
        pb.call("y", "echo")
        assert json.loads(pb.recv()["result"])["tool"] == "echo"
        assert b.tool_calls_made == 1
    assert pa.silent(0.2)


def test_calls_queue_behind_live_busy_workers_and_run_when_one_frees(small, hang):
    a = small.open(allowed=("hang",), handler=hang)
    pa = small.peer(a)
    pa.hello(a.exec_id, a.test_token)
    pa.call("1", "hang")
    pa.call("2", "hang")
    hang.wait_entered("hang", 2)
    with small.open(allowed=("echo",), handler=hang) as b:
        pb = small.peer(b)
        pb.hello(b.exec_id, b.test_token)
        pb.call("x", "echo")
        assert pb.silent(0.2)  # queued, not refused: the busy calls' execution still runs
        assert small.server._pool.queued == 1
        hang.release.set()
        assert json.loads(pb.recv()["result"])["tool"] == "echo"
        assert {pa.recv()["id"], pa.recv()["id"]} == {"1", "2"}
    a.close()


def test_a_queued_call_waits_a_bounded_time(small, hang):
    a = small.open(allowed=("hang",), handler=hang)
    pa = small.peer(a)
    pa.hello(a.exec_id, a.test_token)
    pa.call("1", "hang")
    pa.call("2", "hang")
    hang.wait_entered("hang", 2)
    with small.open(allowed=("echo",), handler=hang) as b:
        pb = small.peer(b)
        pb.hello(b.exec_id, b.test_token)
        started = time.monotonic()
        pb.call("x", "echo")
        reply = pb.recv()
        assert 0.9 < time.monotonic() - started < 3.0
        assert json.loads(reply["result"]) == {"error": waited_message(1.0)}
        assert b.tool_calls_made == 0
    a.close()


def test_waiting_calls_inherit_the_worker_of_a_finished_one(small):
    # 2 workers, one execution with 8 calls: each finished call hands its worker to the
    # next waiting one, so none is refused as "busy"
    with small.open() as ch:
        p = small.peer(ch)
        p.hello(ch.exec_id, ch.test_token)
        for i in range(8):
            p.call(str(i), "sleep", {"s": 0.02, "i": i})
        results = [json.loads(p.recv()["result"]) for _ in range(8)]
        assert sorted(r["args"]["i"] for r in results) == list(range(8))
        assert small.server._pool.size == 2


def test_pool_refuses_only_when_abandoned_jobs_hold_it():
    class Job:
        def __init__(self, gate: threading.Event, abandoned: bool = False) -> None:
            self.gate, self.abandoned = gate, abandoned

        def __call__(self) -> None:
            self.gate.wait(5)

    pool = WorkerPool(2, max_wait=60)
    gate = threading.Event()
    try:
        live = Job(gate)
        assert pool.submit(live) and pool.submit(Job(gate, abandoned=True))
        deadline = time.monotonic() + 5
        while len(pool._running) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert pool.submit(Job(threading.Event()))  # queued: a live job holds a worker
        assert pool.queued == 1
        live.abandoned = True  # now nothing would ever free a worker
        assert not pool.submit(Job(threading.Event()))
        assert len(pool.expired()) == 1  # the queued one is handed back at once too
    finally:
        gate.set()
    deadline = time.monotonic() + 5
    while pool.busy:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert pool.size == 2
    pool.close()
