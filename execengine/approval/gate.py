"""The approval check every command goes through before it runs.

Order: hard blocks refuse outright (even with ``approvals.mode: allow``); patterns already
approved (``approvals.command_allowlist``, "always" answers, this session's answers) pass;
``mode: allow`` runs and ``mode: deny`` refuses the rest; otherwise the approvers are asked
in turn: the smart classifier when ``mode: smart`` and the host gave one
(``ctx.call.classifier``), then the host's approver (``ctx.call.approver``), then
the policy, which denies with a message saying how to allow the command.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from execengine._configload import default_config_path
from execengine.approval.approver import (
    Answer,
    ApprovalRequest,
    Approver,
    ChainApprover,
    Decision,
    PolicyApprover,
    SmartApprover,
)
from execengine.approval.matcher import assess
from execengine.approval.persist import persist_allowlist

if TYPE_CHECKING:
    from execengine.context import ToolContext

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    #: "safe", "allowed" (already approved or approved now), "denied", "blocked"
    status: str
    message: str = ""
    descriptions: tuple[str, ...] = ()


class ApprovalState:
    """Approvals remembered by one registry: per (session, pattern), and "always"."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: one question at a time: a second call waits and may find the answer remembered
        self.asking = threading.Lock()
        self._session: set[tuple[str, str]] = set()
        self._always: set[str] = set()

    def approved(self, session: str, description: str) -> bool:
        with self._lock:
            return description in self._always or (session, description) in self._session

    def remember(self, session: str, descriptions: tuple[str, ...], *, always: bool) -> None:
        with self._lock:
            for d in descriptions:
                self._session.add((session, d))
                if always:
                    self._always.add(d)

    def forget_session(self, session: str) -> None:
        with self._lock:
            self._session = {k for k in self._session if k[0] != session}


def _approvers(ctx: ToolContext) -> Approver:
    chain: list[Approver] = []
    mode = ctx.config.approvals.mode
    classifier = ctx.call.classifier
    if mode == "smart" and classifier is not None:
        chain.append(SmartApprover(classifier))
    host = ctx.call.approver
    if host is not None:
        chain.append(host)
    chain.append(PolicyApprover("ask"))
    return ChainApprover(chain)


def check_command(command: str, ctx: ToolContext, *, sandboxed: bool = False) -> Verdict:
    """``sandboxed``: the command runs inside a sandbox (see
    :mod:`execengine.terminal.confined`), which is the boundary: only hard blocks apply."""
    found = assess(command)
    if found.blocked:
        what = ", ".join(p.description for p in found.blocked)
        return Verdict(False, "blocked", f"BLOCKED: this command matches a hard block ({what}); "
                       "no approval or setting allows it.", tuple(p.description
                                                               for p in found.blocked))
    if not found.flagged:
        return Verdict(True, "safe")
    if sandboxed:
        return Verdict(True, "sandboxed", "runs in a sandbox: no approval needed",
                       found.descriptions)
    cfg = ctx.config.approvals
    state = ctx.services.approvals
    session = ctx.task_key

    def pending() -> tuple[str, ...]:
        return tuple(dict.fromkeys(
            p.description for p in found.flagged
            if p.description not in cfg.command_allowlist
            and not state.approved(session, p.description)))

    if not pending():
        return Verdict(True, "allowed", descriptions=found.descriptions)
    if cfg.mode == "allow":
        return Verdict(True, "allowed", "approvals.mode is 'allow'", found.descriptions)
    if cfg.mode == "deny":
        refusal = PolicyApprover("deny").decide(ApprovalRequest(command, pending(), session))
        return Verdict(False, "denied", refusal.reason, pending())
    with state.asking:
        todo = pending()
        if not todo:
            return Verdict(True, "allowed", descriptions=found.descriptions)
        request = ApprovalRequest(command, todo, session, ctx.origin)
        answer: Answer | None
        try:
            answer = _approvers(ctx).decide(request)
        except Exception as exc:
            log.exception("approver failed")
            answer = Answer(Decision.DENY, f"the approver failed: {type(exc).__name__}: {exc}")
        if answer is None or not answer.approved:
            reason = answer.reason if answer else "nobody approved it"
            return Verdict(False, "denied", f"Command denied: {reason}", todo)
        if answer.decision in (Decision.SESSION, Decision.ALWAYS):
            state.remember(session, todo, always=answer.decision is Decision.ALWAYS)
        if answer.decision is Decision.ALWAYS:
            persist_approvals(ctx, todo)
        return Verdict(True, "allowed", f"approved ({answer.decision.value})", todo)


def persist_approvals(ctx: ToolContext, descriptions: tuple[str, ...]) -> None:

    path = ctx.config.config_path() or default_config_path()
    for d in descriptions:
        try:
            persist_allowlist(path, d)
        except Exception:  # the approval stands for this process either way
            log.exception("could not add %r to %s", d, path)
