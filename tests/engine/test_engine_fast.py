"""The engine's execution path through its seams: an in-process launcher and the in-memory
RPC transport. Result mapping, budget, refusal, timeout, interrupt and the hello deadline
in milliseconds, no child process (the real thing is covered by test_engine_execute)."""

from __future__ import annotations

import threading
import time

import pytest
from _engine_helpers import engine_config, make_registry

from execengine.engine import Engine
from execengine.engine.result import INTERRUPTED, timeout_message
from execengine.launch.inprocess import InProcessLauncher
from execengine.rpc.memory import MemoryServer


@pytest.fixture
def fast(calls):
    made = []

    def make(script, *, bootstrap=True, **over):
        cfg = engine_config(**{"kill_grace": 0.2, "hello_timeout": 1.0, **over})
        reg = make_registry(cfg, calls)
        server = MemoryServer(max_workers=8, max_parallel_calls=4)
        launcher = InProcessLauncher(server, script, bootstrap=bootstrap)
        engine = Engine(cfg, reg, launcher=launcher, server=server)
        made.append((engine, reg))
        return engine

    yield make
    for engine, reg in made:
        engine.close()
        reg.close()


def test_output_tool_calls_and_success(fast, calls):
    def script(p):
        p.print("searching")
        r = p.call("web_search", {"query": "cats"})
        p.print("got", r["query"], r["origin"])
        return 0

    started = time.monotonic()
    r = fast(script).execute("print('ignored by the scripted child')", task_id="t1")
    assert time.monotonic() - started < 2
    assert r.status == "success" and r.exit_code == 0
    assert r.output == "searching\ngot cats execute_code\n"
    assert r.tool_calls_made == 1
    assert calls == [({"query": "cats"}, "execute_code", "t1")]


def test_a_failing_script_maps_to_error_with_stderr(fast):
    def script(p):
        p.print("half")
        p.print("Traceback ...\nValueError: nope", err=True)
        return 1

    r = fast(script).execute("x")
    assert (r.status, r.exit_code) == ("error", 1)
    assert r.output.startswith("half\n") and "ValueError: nope" in r.error


def test_budget_refusals_and_argument_validation_reach_the_script(fast):
    seen = {}

    def script(p):
        seen["memory"] = p.call("memory", {})
        seen["bad"] = p.call("web_search", {"query": 5, "junk": True})
        seen["hidden"] = p.call("terminal", {"command": "ls", "background": True})
        seen["calls"] = [p.call("web_search", {"query": str(i)}) for i in range(4)]
        return 0

    r = fast(script, max_tool_calls=4).execute("x")
    assert r.status == "success"
    assert "not available in execute_code" in seen["memory"]["error"]
    assert "query: expected string, got integer" in seen["bad"]["error"]
    assert "background" in seen["hidden"]["error"]
    # admitted calls spend the budget even when the host then refuses their arguments; a
    # tool the script may not call does not
    results = seen["calls"]
    assert [x.get("query") for x in results[:2]] == ["0", "1"]
    assert all("limit reached (4)" in x["error"] for x in results[2:])
    assert r.tool_calls_made == 4


def test_timeout_escalates_and_says_so(fast):
    def script(p):
        p.print("before")
        p.stop.wait(10)  # stops on SIGTERM
        return 0

    r = fast(script).execute("x", timeout=0.3)
    assert r.status == "timeout" and r.output.startswith("before\n")
    assert r.error == timeout_message(0.3) and r.exit_code == -15


def test_a_child_ignoring_sigterm_is_killed(fast):
    def script(p):
        p.honours_sigterm = False
        p.stop.wait(10)  # only the kill stops it
        return 0

    started = time.monotonic()
    r = fast(script).execute("x", timeout=0.2)
    assert r.status == "timeout" and r.exit_code == -9
    assert time.monotonic() - started < 3


def test_interrupt_from_another_thread(fast):
    running = threading.Event()
    stop = threading.Event()

    def script(p):
        p.print("working")
        running.set()
        p.stop.wait(10)
        return 0

    engine = fast(script)
    threading.Thread(target=lambda: (running.wait(5), stop.set()), daemon=True).start()
    r = engine.execute("x", interrupt=stop)
    assert r.status == "interrupted" and r.error == INTERRUPTED
    assert r.output.startswith("working\n")


def test_a_child_that_never_says_hello_is_killed_at_the_deadline(fast):
    def script(p):
        p.stop.wait(10)
        return 0

    r = fast(script, bootstrap=False, hello_timeout=0.2).execute("x")
    assert r.status == "error" and "hello" in r.error.lower()


@pytest.mark.parametrize(("behaviour", "reason", "ended_by"), [
    ("exit", "exited", "exit"),
    ("honour", "timeout", "sigterm"),
    ("ignore", "timeout", "kill"),
])
def test_the_outcome_records_which_escalation_step_ended_the_child(behaviour, reason,
                                                                    ended_by):
    from execengine.launch.base import LaunchSpec
    from execengine.launch.supervise import OutputCapture, supervise

    def script(p):
        if behaviour == "exit":
            return 0
        p.honours_sigterm = behaviour == "honour"
        p.stop.wait(10)
        return 0

    with MemoryServer() as server:
        launcher = InProcessLauncher(server, script, bootstrap=False)
        child = launcher.launch(LaunchSpec(argv=["x"], env={}, cwd="/", run_token="r"))
        outcome = supervise(child, stdout=OutputCapture(1000), stderr=OutputCapture(1000),
                            timeout=0.2, kill_grace=0.2)
    assert (outcome.reason, outcome.ended_by) == (reason, ended_by)


@pytest.mark.parametrize("timeout", [float("inf"), float("nan"), 1e308, 0, -1, True])
def test_a_timeout_argument_out_of_range_is_a_clear_error_before_anything_runs(fast, timeout):
    from execengine.errors import ConfigError

    def script(p):  # never started
        raise AssertionError("ran")

    engine = fast(script)
    with pytest.raises(ConfigError, match="timeout must be a positive number of seconds"):
        engine.execute("print(1)", timeout=timeout)
