"""A channel serving the cells of a session kernel: authority and budget per cell."""

from __future__ import annotations

import json
import threading
import time

from execengine.rpc.channel import late_message


def test_calls_between_cells_are_refused_and_each_cell_has_its_own_budget(rpc):
    ch = rpc.open(max_tool_calls=50)
    ch.close_cell()  # a kernel's channel starts closed
    p = rpc.peer(ch)
    assert p.hello(ch.exec_id, ch.test_token)["type"] == "welcome"
    p.call("1", "echo", {"n": 1})
    assert json.loads(p.recv()["result"]) == {"error": late_message()}
    assert rpc.calls == []

    seen: list[str] = []
    ch.open_cell(lambda tool, args: (seen.append("cell1"), "{}")[1], 1)
    p.call("2", "echo")
    assert p.recv()["result"] == "{}"
    p.call("3", "echo")  # over this cell's budget of 1
    assert "limit reached (1)" in json.loads(p.recv()["result"])["error"]
    assert ch.tool_calls_made == 1
    ch.close_cell()
    p.call("4", "echo")
    assert json.loads(p.recv()["result"]) == {"error": late_message()}

    ch.open_cell(lambda tool, args: (seen.append("cell2"), "{}")[1], 1)
    assert ch.tool_calls_made == 0  # a fresh budget, and the second cell's handler
    p.call("5", "echo")
    assert p.recv()["result"] == "{}"
    assert seen == ["cell1", "cell2"]


def test_a_call_waiting_when_its_cell_ends_is_refused_not_run(rpc):
    """max_parallel_calls is 4: the fifth call of a cell waits for a slot; when the cell
    ends before it gets one, it is answered with a refusal and its handler never runs."""
    release = threading.Event()
    started = threading.Semaphore(0)
    ran: list[int] = []

    def handler(tool: str, args: dict) -> str:
        ran.append(args["n"])
        started.release()
        release.wait(10)
        return "{}"

    ch = rpc.open(max_tool_calls=50)
    ch.open_cell(handler, 50)
    p = rpc.peer(ch)
    assert p.hello(ch.exec_id, ch.test_token)["type"] == "welcome"
    for n in range(5):
        p.call(str(n), "echo", {"n": n})
    for _ in range(4):
        assert started.acquire(timeout=5)
    deadline = time.monotonic() + 5  # the fifth is admitted (waiting for a slot)
    while ch.in_flight < 5 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert ch.in_flight == 5 and ch.running == 4
    ch.close_cell()
    ch.open_cell(handler, 50)  # the next cell: the waiting call still belongs to the last
    release.set()
    replies = {}
    for _ in range(5):
        msg = p.recv()
        replies[msg["id"]] = msg["result"]
    assert json.loads(replies["4"]) == {"error": late_message()}
    assert sorted(ran) == [0, 1, 2, 3]
