"""Inside a sandbox the sandbox is the boundary: no prompt for the flagged patterns, the
hard blocks stay. Counted over the whole pattern suite of test_matcher."""

from __future__ import annotations

from test_matcher import BLOCKED, FLAGGED, NOT_FLAGGED  # same folder (rootdir import mode)

from execengine.approval.approver import ApprovalRequest, Decision
from execengine.approval.gate import check_command
from execengine.context import CallContext, ToolContext
from execengine.registry import ToolRegistry


class Counting:
    def __init__(self) -> None:
        self.asked = 0

    def decide(self, request: ApprovalRequest):
        from execengine.approval.approver import Answer

        self.asked += 1
        return Answer(Decision.ONCE, "test", "counting")


def prompts(sandboxed: bool) -> tuple[int, int, int]:
    """(prompts asked, commands allowed, commands blocked) over the whole suite."""
    host = Counting()
    allowed = blocked = 0
    with ToolRegistry() as reg:
        for command in [c for c, _ in FLAGGED] + [c for c, _ in BLOCKED] + NOT_FLAGGED:
            ctx = ToolContext(reg, reg.config,
                              CallContext(task_id="t", origin="execute_code", approver=host))
            verdict = check_command(command, ctx, sandboxed=sandboxed)
            allowed += verdict.allowed
            blocked += verdict.status == "blocked"
    return host.asked, allowed, blocked


def test_the_sandbox_removes_every_prompt_and_keeps_every_hard_block():
    outside = prompts(sandboxed=False)
    inside = prompts(sandboxed=True)
    assert outside[0] == len(FLAGGED) > 0  # each flagged command prompts on the host
    assert inside[0] == 0  # none in the sandbox
    assert inside[2] == outside[2] == len(BLOCKED)  # hard blocks stay
    assert inside[1] == len(FLAGGED) + len(NOT_FLAGGED)


def test_a_sandboxed_verdict_says_so():
    with ToolRegistry() as reg:
        ctx = ToolContext(reg, reg.config, CallContext(task_id="t", origin="execute_code"))
        verdict = check_command("rm -rf /tmp/project", ctx, sandboxed=True)
    assert verdict.allowed and verdict.status == "sandboxed"
    assert "recursive" in " ".join(verdict.descriptions)
