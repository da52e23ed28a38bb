"""What the red-team tests of the command approval's shell parsing share.

A command goes through :func:`check_command` as the terminal tool calls it: with nobody to
ask (``approvals.mode: ask``, the default) or with a host approver that says "always".
"""

from __future__ import annotations

from typing import Any

from execengine.approval.approver import Answer, ApprovalRequest, Decision
from execengine.approval.gate import Verdict, check_command
from execengine.approval.matcher import assess
from execengine.context import CallContext, ToolContext
from execengine.registry import ToolRegistry


class Always:
    """A host approver that approves everything, for ever."""

    def __init__(self) -> None:
        self.asked = 0

    def decide(self, request: ApprovalRequest) -> Answer:
        self.asked += 1
        return Answer(Decision.ALWAYS, "test", "always")


def call_context(reg: ToolRegistry, **fields: Any) -> ToolContext:
    return ToolContext(reg, reg.config, CallContext(task_id="t1", **fields))


def check_hard_blocked(attack: str, key: str) -> None:
    """``attack`` hits the hard block ``key``: refused, sandboxed or not, even for a host
    that approves everything, which is never asked."""
    assert key in {p.key for p in assess(attack).blocked}, assess(attack).normalized
    with ToolRegistry() as reg:
        host = Always()
        for sandboxed in (False, True):
            verdict = check_command(attack, call_context(reg, approver=host),
                                    sandboxed=sandboxed)
            assert verdict.status == "blocked" and not verdict.allowed, verdict
        assert host.asked == 0


def refused_unasked(command: str) -> Verdict:
    """The verdict on ``command`` with nobody to ask, which must refuse it."""
    with ToolRegistry() as reg:
        verdict = check_command(command, call_context(reg))
    assert not verdict.allowed, verdict
    return verdict


def check_passes(command: str) -> None:
    """``command`` is safe to the matcher and runs without asking."""
    found = assess(command)
    assert found.safe, (found.descriptions, found.normalized)
    with ToolRegistry() as reg:
        assert check_command(command, call_context(reg)).status == "safe"
