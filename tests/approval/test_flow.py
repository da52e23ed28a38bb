"""Approvers and the gate: every approver through a real dispatch-shaped context."""

from __future__ import annotations

import asyncio
import io
import os
import pty
import threading
from pathlib import Path
from typing import Any

from execengine.approval.approver import (
    ApprovalRequest,
    CallbackApprover,
    Decision,
    PromptApprover,
    SmartApprover,
)
from execengine.approval.gate import check_command
from execengine.config import Config, load_config
from execengine.config import load_config as load
from execengine.context import CallContext, ToolContext
from execengine.registry import ToolRegistry

DANGER = "rm -rf /srv/data"
REQ = ApprovalRequest(DANGER, ("recursive delete",), "t1")


def ctx(reg: ToolRegistry, task: str = "t1", **fields: Any) -> ToolContext:
    return ToolContext(reg, reg.config, CallContext(task_id=task, **fields))


class Counting:
    def __init__(self, answer: Decision | None) -> None:
        self.answer, self.asked = answer, 0

    def decide(self, request: ApprovalRequest):
        from execengine.approval.approver import Answer

        self.asked += 1
        return None if self.answer is None else Answer(self.answer, "test", "counting")


def test_safe_and_blocked_need_no_approver() -> None:
    with ToolRegistry() as reg:
        assert check_command("ls -la", ctx(reg)).status == "safe"
        host = Counting(Decision.ALWAYS)
        v = check_command("rm -rf /", ctx(reg, approver=host))
        assert v.status == "blocked" and not v.allowed and host.asked == 0
    with ToolRegistry(Config().with_overrides({"approvals.mode": "allow"})) as reg:
        assert check_command("rm -rf /", ctx(reg)).status == "blocked"
        assert check_command(DANGER, ctx(reg)).allowed


def test_ask_without_approver_denies_and_says_how() -> None:
    with ToolRegistry() as reg:
        v = check_command(DANGER, ctx(reg))
        assert not v.allowed and v.status == "denied"
        assert "approvals.command_allowlist" in v.message and "recursive delete" in v.message


def test_mode_deny_ignores_the_approver() -> None:
    with ToolRegistry(Config().with_overrides({"approvals.mode": "deny"})) as reg:
        host = Counting(Decision.ONCE)
        assert not check_command(DANGER, ctx(reg, approver=host)).allowed
        assert host.asked == 0


def test_config_allowlist_passes() -> None:
    cfg = Config().with_overrides({"approvals.command_allowlist": ["recursive delete"]})
    with ToolRegistry(cfg) as reg:
        assert check_command(DANGER, ctx(reg)).allowed


def test_once_session_and_per_session_memory() -> None:
    with ToolRegistry() as reg:
        once = Counting(Decision.ONCE)
        assert check_command(DANGER, ctx(reg, approver=once)).allowed
        assert check_command(DANGER, ctx(reg, approver=once)).allowed
        assert once.asked == 2  # once is not remembered
        sess = Counting(Decision.SESSION)
        assert check_command(DANGER, ctx(reg, approver=sess)).allowed
        assert check_command("rm -r ../other", ctx(reg, approver=sess)).allowed
        assert sess.asked == 1  # same session, same pattern
        assert not check_command(DANGER, ctx(reg, task="t2")).allowed  # other session
        assert not check_command("git push -f", ctx(reg)).allowed  # other pattern
        deny = Counting(Decision.DENY)
        assert not check_command("git push -f", ctx(reg, approver=deny)).allowed


def test_smart_classifier_approves_denies_or_escalates() -> None:
    cfg = Config().with_overrides({"approvals.mode": "smart"})
    with ToolRegistry(cfg) as reg:
        host = Counting(Decision.ONCE)
        v = check_command(DANGER, ctx(reg, approver=host, classifier=lambda r: "deny"))
        assert not v.allowed and host.asked == 0 and "classifier" in v.message
        assert check_command(DANGER, ctx(reg, approver=host, classifier=lambda r: "approve"))\
            .allowed
        assert host.asked == 0
        assert check_command(DANGER, ctx(reg, approver=host,
                                         classifier=lambda r: "escalate")).allowed
        assert host.asked == 1

        def broken(r: ApprovalRequest) -> str:
            raise RuntimeError("model down")

        assert SmartApprover(broken).decide(REQ) is None
        # escalation with nobody behind it: the policy denies
        assert not check_command(DANGER, ctx(reg, classifier=lambda r: "escalate")).allowed


def test_prompt_approver_over_a_real_pipe() -> None:
    r, w = os.pipe()
    with os.fdopen(r, "r") as rin, os.fdopen(w, "w") as win:
        out = io.StringIO()
        win.write("what\nsession\n")
        win.flush()
        answer = PromptApprover(rin, out, timeout=5).decide(REQ)
        assert answer.decision is Decision.SESSION
        assert "Not understood: 'what'" in out.getvalue() and DANGER in out.getvalue()
        win.close()
        closed = PromptApprover(rin, out, timeout=5).decide(REQ)
        assert closed.decision is Decision.DENY and not closed.timed_out


def test_prompt_approver_on_a_pty_times_out_then_answers() -> None:
    master, slave = pty.openpty()
    try:
        with os.fdopen(os.dup(slave), "r") as tty_in:
            out = io.StringIO()
            denied = PromptApprover(tty_in, out, timeout=0.2).decide(REQ)
            assert denied.decision is Decision.DENY and denied.timed_out
            assert denied.reason == "no answer within 0.2s"
            os.write(master, b"a\n")
            assert PromptApprover(tty_in, out, timeout=5).decide(REQ).decision is \
                Decision.ALWAYS
    finally:
        os.close(master)
        os.close(slave)


def test_callback_approver_relays_and_times_out() -> None:
    seen: list[ApprovalRequest] = []

    async def relay(request: ApprovalRequest) -> str:
        seen.append(request)
        await asyncio.sleep(0.01)
        return "once"

    assert CallbackApprover(relay).decide(REQ).decision is Decision.ONCE  # type: ignore[union-attr]
    assert seen[0].command == DANGER

    async def silent(request: ApprovalRequest) -> str:
        await asyncio.sleep(10)
        return "once"

    answer = CallbackApprover(silent, timeout=0.1).decide(REQ)
    assert answer is not None and answer.decision is Decision.DENY and answer.timed_out

    async def weird(request: ApprovalRequest) -> str:
        return "perhaps"

    answer = CallbackApprover(weird).decide(REQ)
    assert answer is not None and answer.decision is Decision.DENY and not answer.timed_out


def test_always_persists_and_preserves_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    original = ("# my settings\nterminal:\n  timeout: 30  # seconds\n\n"
                "approvals:\n  mode: ask  # keep asking\n\nweb:\n  timeout: 5\n")
    path.write_text(original)
    with ToolRegistry(load_config(path)) as reg:
        host = Counting(Decision.ALWAYS)
        assert check_command(DANGER, ctx(reg, approver=host)).allowed
        assert check_command(DANGER, ctx(reg, task="other", approver=host)).allowed
        assert host.asked == 1  # "always" covers every session
    text = path.read_text()
    for line in original.splitlines():
        assert line in text.splitlines()
    assert load(path).approvals.command_allowlist == ("recursive delete",)
    assert load(path).terminal.timeout == 30
    # a new registry from the file does not ask again
    with ToolRegistry(load_config(path)) as reg:
        assert check_command(DANGER, ctx(reg)).allowed
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_concurrent_callers_are_asked_once() -> None:
    with ToolRegistry() as reg:
        gate = threading.Event()

        class Slow(Counting):
            def decide(self, request):
                gate.wait(5)
                return super().decide(request)

        host = Slow(Decision.SESSION)
        results: list[bool] = []
        threads = [threading.Thread(target=lambda: results.append(
            check_command(DANGER, ctx(reg, approver=host)).allowed)) for _ in range(4)]
        for t in threads:
            t.start()
        gate.set()
        for t in threads:
            t.join(10)
        assert results == [True] * 4 and host.asked == 1
