"""The execute_code tool approves the whole script before anything starts; a refusal (by the
gate or a ``pre_tool_call`` hook) is an execution result like every other outcome."""

from __future__ import annotations

import json

import pytest
from _engine_helpers import Recorder, engine_config, make_registry

from execengine.approval.approver import Answer, ApprovalRequest, Decision
from execengine.context import CallContext
from execengine.engine import Engine
from execengine.registry import Refuse, ToolRegistry
from execengine.tools import code_execution_tool

BLOCKED_HEADLESS = (
    "BLOCKED: execute_code runs arbitrary local Python (including subprocess calls that "
    "bypass shell-string approval checks). This session's approval policy is 'deny' "
    "(approvals.mode), so no user is asked to approve it.")


class Host:
    def __init__(self, answer: Decision) -> None:
        self.answer, self.asked = answer, 0

    def decide(self, request: ApprovalRequest) -> Answer:
        self.asked += 1
        return Answer(self.answer, "test", "host")


@pytest.fixture
def tool(leakcheck):
    """``tool(**config) -> (registry, recorder)``: the execute_code tool on a registry whose
    engine launches through a recorder at level ``none`` (so nothing is confined)."""
    made: list[tuple[ToolRegistry, Engine]] = []

    def make(**over: object) -> tuple[ToolRegistry, Recorder]:
        cfg = engine_config().with_overrides(over)
        reg = make_registry(cfg)
        reg.apply(code_execution_tool.specs)
        recorder = Recorder()
        leakcheck.append(recorder)
        made.append((reg, Engine(cfg, reg, launcher=recorder)))
        return reg, recorder

    yield make
    for reg, engine in made:
        reg.close()
        engine.close()


def run(reg: ToolRegistry, code: str, **kw: object) -> dict:
    return json.loads(reg.dispatch("execute_code", {"code": code}, CallContext(**kw)))


def test_headless_deny_returns_blocked_and_nothing_starts(tool, tmp_path):
    reg, recorder = tool(**{"approvals.mode": "deny"})
    marker = tmp_path / "ran"
    d = run(reg, f"open({str(marker)!r}, 'w').write('x')\nprint('ran')", task_id="cron")
    assert d["status"] == "error" and d["error"].startswith(BLOCKED_HEADLESS)
    assert (d["output"], d["tool_calls_made"], d["refused_by"]) == ("", 0, "approval")
    assert "exit_code" not in d
    assert recorder.specs == [] and not marker.exists()


def test_nobody_to_ask_at_level_none_is_blocked(tool):
    reg, recorder = tool()
    d = run(reg, "print(1)")
    assert d["status"] == "error" and "no user is present to approve it" in d["error"]
    assert recorder.specs == []


def test_session_approval_runs_and_is_remembered(tool):
    reg, recorder = tool()
    host = Host(Decision.SESSION)
    for _ in range(2):
        d = run(reg, "print('hi')", task_id="s1", approver=host)
        assert d["status"] == "success" and d["output"] == "hi\n" and "refused_by" not in d
    # both ran, as two cells of the session's one kernel (execute_code keeps state)
    assert host.asked == 1 and len(recorder.specs) == 1
    # another session asks again; a denial there starts nothing
    d = run(reg, "print('hi')", task_id="s2", approver=Host(Decision.DENY))
    assert d["error"].startswith("BLOCKED: the user denied this execute_code script.")
    assert "do NOT rephrase it" in d["error"] and len(recorder.specs) == 1


def test_policy_allow_and_deny(tool):
    reg, _ = tool(**{"approvals.execute_code": "allow", "approvals.mode": "deny"})
    assert run(reg, "print(2)")["output"] == "2\n"
    reg, recorder = tool(**{"approvals.execute_code": "deny"})
    d = run(reg, "print(2)", approver=Host(Decision.ONCE))
    assert "approvals.execute_code is 'deny'" in d["error"] and recorder.specs == []


def test_empty_code_and_unavailable_come_before_approval(tool):
    reg, _ = tool(**{"approvals.mode": "deny"})
    assert run(reg, "  ")["error"] == "No code provided."
    d = run(reg, "print(1)", enabled_toolsets=("code_execution", "memory"))
    assert "unavailable" in d["error"]


def test_pre_tool_call_refusal_is_an_execution_result(tool):
    reg, recorder = tool(**{"approvals.execute_code": "allow"})
    reg.add_hook("pre_tool_call",
                 lambda name, args, ctx: Refuse("scripts are off during the demo"))
    d = run(reg, "print(1)")
    assert d == {"status": "error", "output": "", "tool_calls_made": 0,
                 "duration_seconds": 0.0,
                 "error": "Tool call refused: scripts are off during the demo",
                 "refused_by": "hook"}
    assert recorder.specs == []
    # other tools keep the plain error object
    assert json.loads(reg.dispatch("web_search", {"query": "q"})) == {
        "error": "Tool call refused: scripts are off during the demo"}


def test_a_confined_execution_runs_without_asking():
    """The real launcher: at restricted or isolated the default policy (auto) needs nobody."""
    from execengine.errors import IsolationError
    from execengine.isolation import detect
    from execengine.launch.factory import choose_level

    try:
        level = choose_level("auto", None, detect())
    except IsolationError:
        level = "none"
    if level == "none":
        pytest.skip("this host offers no confining isolation level")
    reg = make_registry(engine_config())
    reg.apply(code_execution_tool.specs)
    engine = Engine(reg.config, reg)
    try:
        assert engine.launcher.level == level
        host = Host(Decision.DENY)
        d = run(reg, "print('confined')", approver=host)
        assert d["status"] == "success" and d["output"] == "confined\n" and host.asked == 0
    finally:
        reg.close()
        engine.close()
