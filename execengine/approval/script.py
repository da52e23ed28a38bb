"""Approval of a whole ``execute_code`` script before anything starts.

A script can do what no per-call check sees: ``subprocess``, ``os.system``, ``shutil`` run
inside it without passing through the terminal tool's dangerous-command approval. So the
script itself is approved, as a whole, before its child is spawned; a refusal means nothing
started. ``approvals.execute_code`` sets the policy:

- ``auto`` (default): approve without asking when the script is **confined** (see
  :class:`ScriptScope`), otherwise ask as below;
- ``ask``: ask as below even when confined;
- ``allow``: approve every script (a trusted host);
- ``deny``: never run scripts.

Asking follows the session's policy: an approval remembered for this session (the key
``execute_code``, also accepted from ``approvals.command_allowlist``) passes;
``approvals.mode: allow`` approves and ``deny`` refuses; otherwise the smart classifier (with
``mode: smart``) assesses the script text, then the host's approver is shown the redacted
script and answers once / session / always / deny. With nobody to ask, the script is refused.
Every refusal starts with ``BLOCKED:`` and tells the model not to retry or rephrase.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

from execengine.approval.approver import (
    Answer,
    ApprovalRequest,
    Approver,
    ChainApprover,
    Classifier,
    Decision,
    SmartApprover,
)
from execengine.approval.gate import ApprovalState
from execengine.config import ApprovalsConfig
from execengine.launch.supervise import redact

log = logging.getLogger(__name__)

#: the key a session-wide or permanent approval of scripts is remembered under
SCRIPT_KEY = "execute_code"
SCRIPT_DESCRIPTION = "execute_code script execution"
#: isolation levels that confine the script's own process (see the README's security model)
CONFINING_LEVELS = frozenset({"restricted", "isolated"})
#: tools whose calls from a script are dispatched like the agent's own: same hooks, same
#: per-call approval (terminal's dangerous-command check), foreground only
CHECKED_TOOLS = frozenset({"web_search", "web_extract", "read_file", "write_file",
                           "search_files", "patch", "terminal"})

UNATTENDED = ("BLOCKED: execute_code runs arbitrary local Python (including subprocess calls "
              "that bypass shell-string approval checks). ")
HOW_TO_ALLOW = ("Use normal tools instead. To let scripts run here, give the session an "
                "approver, or set approvals.execute_code: allow only if this host is "
                "intentionally trusted.")
DO_NOT_RETRY = ("The user has NOT consented to this script. Do NOT retry it, do NOT rephrase "
                "it, and do NOT try to reach the same outcome another way; stop and wait for "
                "the user.")


def denied_message() -> str:
    return "BLOCKED: the user denied this execute_code script. " + DO_NOT_RETRY


def timeout_message(seconds: float | None) -> str:
    within = f" within {seconds:g}s" if seconds else ""
    return (f"BLOCKED: nobody approved this execute_code script{within}. " + DO_NOT_RETRY
            + " Silence is not consent.")


def smart_denied_message() -> str:
    return ("BLOCKED by smart approval: this execute_code script was assessed as dangerous. "
            "Do NOT retry it or rephrase it.")


def policy_deny_message() -> str:
    return (UNATTENDED + "approvals.execute_code is 'deny': scripts never run in this "
            "session. Use normal tools instead.")


def session_deny_message(why: str = "") -> str:
    return (UNATTENDED + "This session's approval policy is 'deny' (approvals.mode), so no "
            "user is asked to approve it. " + (why + " " if why else "") + HOW_TO_ALLOW)


def nobody_message(why: str = "") -> str:
    """``why``: why this script is not approved without asking (what to change)."""
    return (UNATTENDED + "It needs approval and no user is present to approve it (this "
            "session has no approver). " + (why + " " if why else "") + HOW_TO_ALLOW)


@dataclass(frozen=True)
class ScriptScope:
    """What a script would run with: its isolation level and the tools it may call.

    It is **confined** when its own process runs at a confining level (``restricted`` or
    ``isolated``) and its tool calls are confined: every tool it may call is one whose
    script calls go through the same dispatcher, hooks and per-call approval as the agent's
    own (so the script can reach nothing outside its sandbox that the agent could not reach
    with a direct, checked call), and that per-call approval is on (``approvals.mode`` is
    not ``allow``, which would let a script's terminal commands through unchecked).

    Those calls still act on the host with the agent's authority, not within the script's
    own writable roots: the gate removes the bypass of the per-call checks, not the checks'
    limits. An execution policy that confines tool calls to the script's roots belongs in
    :meth:`tool_calls_confined` when it exists.
    """

    level: str
    tools: tuple[str, ...] = ()
    #: more tools dispatched like the agent's own (the MCP servers' tools)
    also_checked: tuple[str, ...] = ()

    def unchecked(self) -> list[str]:
        """The tools a script may call whose calls are not checked like the agent's."""
        checked = CHECKED_TOOLS.union(self.also_checked)
        return sorted(t for t in self.tools if t not in checked)

    def tool_calls_confined(self, approvals: ApprovalsConfig) -> bool:
        if self.unchecked():
            return False
        return not ("terminal" in self.tools and approvals.mode == "allow")

    def confined(self, approvals: ApprovalsConfig) -> bool:
        return self.level in CONFINING_LEVELS and self.tool_calls_confined(approvals)

    def why_not_confined(self, approvals: ApprovalsConfig) -> str:
        """Why the script needs approval here, naming what to change."""
        if self.level not in CONFINING_LEVELS:
            return (f"The script would run at isolation level {self.level!r}, which does "
                    "not confine it (code_execution.isolation: restricted or isolated "
                    "does).")
        unchecked = self.unchecked()
        if unchecked:
            return (f"It may call tools whose calls are not checked like the agent's own "
                    f"({', '.join(unchecked)}): remove them from the session's tools, or "
                    "approve scripts.")
        if approvals.execute_code == "ask":
            return ("approvals.execute_code is 'ask': a person approves every script, "
                    "sandboxed or not.")
        return ("approvals.mode is 'allow', so its terminal commands would run unchecked "
                "(use another approvals.mode, or leave terminal out of the session).")


@dataclass(frozen=True)
class ScriptVerdict:
    allowed: bool
    #: "approved" or "blocked"
    status: str
    #: for a refusal, the text the model sees (``BLOCKED: ...``); for an approval, why
    message: str = ""
    #: what decided: "policy", "confined", "remembered", "session-policy", "smart",
    #: "prompt", "callback" (the approver's name), "nobody"
    by: str = ""
    decision: Decision | None = None


_SECRET_ASSIGNMENT = re.compile(
    r"""(?ix)
    (?P<name>\b[\w.]*(?:key|token|secret|passw(?:or)?d|credential|auth|bearer|dsn|webhook)
        [\w.]*\b ["']?\s*[:=]\s*)
    (?P<q>["'])(?P<value>[^"'\n]{4,})(?P=q)
    """)


def redact_script(code: str) -> str:
    """The script as a person may be shown it: API-key-like values and string literals
    assigned to secret-looking names masked. The raw script is what is assessed and run."""

    def mask(m: re.Match[str]) -> str:
        return f"{m.group('name')}{m.group('q')}[REDACTED]{m.group('q')}"

    return redact(_SECRET_ASSIGNMENT.sub(mask, code))


def check_script(
    code: str,
    scope: ScriptScope,
    approvals: ApprovalsConfig,
    state: ApprovalState,
    *,
    session: str = "default",
    origin: str = "agent",
    approver: Approver | None = None,
    classifier: Classifier | None = None,
    persist: Callable[[str], None] | None = None,
) -> ScriptVerdict:
    """Decide whether ``code`` may start; never raises (an approver that fails denies)."""
    policy = approvals.execute_code
    if policy == "deny":
        return _blocked(policy_deny_message(), "policy")
    if policy == "allow":
        return ScriptVerdict(True, "approved", "approvals.execute_code is 'allow'", "policy")
    if policy == "auto" and scope.confined(approvals):
        return ScriptVerdict(True, "approved", f"confined: level {scope.level}, tool calls "
                             "checked like the agent's own", "confined")

    def remembered() -> bool:
        return SCRIPT_KEY in approvals.command_allowlist or state.approved(session, SCRIPT_KEY)

    if remembered():
        return ScriptVerdict(True, "approved", "approved earlier in this session", "remembered")
    if approvals.mode == "allow":
        return ScriptVerdict(True, "approved", "approvals.mode is 'allow'", "session-policy")
    if approvals.mode == "deny":
        return _blocked(session_deny_message(scope.why_not_confined(approvals)),
                        "session-policy")
    with state.asking:  # one question at a time; a waiting call may find it remembered
        if remembered():
            return ScriptVerdict(True, "approved", "approved earlier in this session",
                                 "remembered")
        request = ApprovalRequest(code, (SCRIPT_DESCRIPTION,), session, origin, kind="script",
                                  display=redact_script(code))
        answer = _ask(request, approvals, approver, classifier)
        if answer is None:
            return _blocked(nobody_message(scope.why_not_confined(approvals)), "nobody")
        if not answer.approved:
            if answer.by == "smart":
                return _blocked(smart_denied_message(), "smart")
            if answer.timed_out:
                return _blocked(timeout_message(_seconds(approver)), answer.by)
            return _blocked(denied_message(), answer.by or "approver")
        if answer.decision in (Decision.SESSION, Decision.ALWAYS):
            state.remember(session, (SCRIPT_KEY,), always=answer.decision is Decision.ALWAYS)
        if answer.decision is Decision.ALWAYS and persist is not None:
            try:
                persist(SCRIPT_KEY)
            except Exception:  # the approval stands for this process either way
                log.exception("could not persist the approval of %r", SCRIPT_KEY)
        return ScriptVerdict(True, "approved", f"approved ({answer.decision.value})",
                             answer.by, answer.decision)


def _ask(request: ApprovalRequest, approvals: ApprovalsConfig, approver: Approver | None,
         classifier: Classifier | None) -> Answer | None:
    chain: list[Approver] = []
    if approvals.mode == "smart" and classifier is not None:
        chain.append(SmartApprover(classifier))
    if approver is not None:
        chain.append(approver)
    try:
        return ChainApprover(chain).decide(request)
    except Exception as exc:
        log.exception("script approver failed")
        return Answer(Decision.DENY, f"the approver failed: {type(exc).__name__}: {exc}",
                      "approver")


def _seconds(approver: Approver | None) -> float | None:
    timeout = getattr(approver, "timeout", None)
    return float(timeout) if isinstance(timeout, (int, float)) else None


def _blocked(message: str, by: str) -> ScriptVerdict:
    return ScriptVerdict(False, "blocked", message, by, Decision.DENY)
