"""The whole-script gate: every path, with the messages the model sees spelled out."""

from __future__ import annotations

import asyncio
import io
import os
import pty
import threading
from pathlib import Path

import pytest

from execengine.approval.approver import (
    Answer,
    ApprovalRequest,
    CallbackApprover,
    Decision,
    PromptApprover,
)
from execengine.approval.gate import ApprovalState
from execengine.approval.persist import persist_allowlist
from execengine.approval.script import (
    CHECKED_TOOLS,
    ScriptScope,
    check_script,
    redact_script,
)
from execengine.config import ApprovalsConfig, Config
from execengine.config import load_config as load

CODE = "import subprocess\nsubprocess.run(['true'])\n"
TOOLS = ("read_file", "terminal", "web_search")
NONE = ScriptScope("none", TOOLS)
ISOLATED = ScriptScope("isolated", TOOLS)
RESTRICTED = ScriptScope("restricted", TOOLS)

UNATTENDED = ("BLOCKED: execute_code runs arbitrary local Python (including subprocess calls "
              "that bypass shell-string approval checks). ")
DO_NOT_RETRY = ("The user has NOT consented to this script. Do NOT retry it, do NOT rephrase "
                "it, and do NOT try to reach the same outcome another way; stop and wait for "
                "the user.")


def approvals(**over: object) -> ApprovalsConfig:
    return Config().with_overrides({f"approvals.{k}": v for k, v in over.items()}).approvals


class Host:
    """An approver that records what it was shown and answers as told."""

    def __init__(self, answer: Decision | None, timeout: float | None = None) -> None:
        self.answer, self.requests = answer, []
        if timeout is not None:
            self.timeout = timeout

    def decide(self, request: ApprovalRequest) -> Answer | None:
        self.requests.append(request)
        return None if self.answer is None else Answer(self.answer, "test", "host")

    @property
    def asked(self) -> int:
        return len(self.requests)


def test_policy_deny_blocks_without_asking() -> None:
    host = Host(Decision.ONCE)
    v = check_script(CODE, ISOLATED, approvals(execute_code="deny"), ApprovalState(),
                     approver=host)
    assert (v.allowed, v.status, v.by) == (False, "blocked", "policy")
    assert v.message == (UNATTENDED + "approvals.execute_code is 'deny': scripts never run in "
                         "this session. Use normal tools instead.")
    assert host.asked == 0


def test_policy_allow_runs_without_asking() -> None:
    host = Host(Decision.DENY)
    v = check_script(CODE, NONE, approvals(execute_code="allow", mode="deny"), ApprovalState(),
                     approver=host)
    assert v.allowed and v.by == "policy" and host.asked == 0


@pytest.mark.parametrize("scope", [ISOLATED, RESTRICTED])
def test_auto_approves_a_confined_script_by_itself(scope: ScriptScope) -> None:
    host = Host(Decision.DENY)
    for mode in ("ask", "smart", "deny"):  # the sandbox is the boundary, whatever the mode
        v = check_script(CODE, scope, approvals(mode=mode), ApprovalState(), approver=host)
        assert v.allowed and v.by == "confined", mode
        assert scope.level in v.message
    assert host.asked == 0


def test_auto_asks_when_not_confined_and_ask_asks_even_when_confined() -> None:
    host = Host(Decision.ONCE)
    assert check_script(CODE, NONE, approvals(), ApprovalState(), approver=host).allowed
    assert host.asked == 1
    v = check_script(CODE, ISOLATED, approvals(execute_code="ask"), ApprovalState(),
                     approver=host)
    assert v.allowed and v.by == "host" and host.asked == 2


def test_what_confined_means() -> None:
    ask = approvals()
    assert ISOLATED.confined(ask) and RESTRICTED.confined(ask)
    assert not NONE.confined(ask)
    # a tool whose script calls are not dispatched like the agent's own (a plugin's)
    assert not ScriptScope("isolated", ("read_file", "deploy")).confined(ask)
    # with approvals.mode: allow a script's terminal commands would pass unchecked
    assert not ISOLATED.confined(approvals(mode="allow"))
    assert ScriptScope("isolated", ("read_file",)).confined(approvals(mode="allow"))
    assert sorted(CHECKED_TOOLS) == ["patch", "read_file", "search_files", "terminal",
                                     "web_extract", "web_search", "write_file"]


def test_headless_with_approvals_deny_is_blocked_and_says_how_to_allow() -> None:
    host = Host(Decision.ONCE)
    v = check_script(CODE, NONE, approvals(mode="deny"), ApprovalState(), approver=host)
    assert not v.allowed and v.by == "session-policy" and host.asked == 0
    assert v.message == (
        UNATTENDED + "This session's approval policy is 'deny' (approvals.mode), so no user is "
        "asked to approve it. The script would run at isolation level 'none', which does not "
        "confine it (code_execution.isolation: restricted or isolated does). Use normal tools "
        "instead. To let scripts run here, give the session an approver, or set "
        "approvals.execute_code: allow only if this host is intentionally trusted.")


def test_the_refusal_names_what_keeps_the_script_from_running_unasked() -> None:
    """Each reason is named once, and never a setting that is already set (a sandboxed
    script with an unchecked tool was told to "sandbox them")."""
    unchecked = check_script(CODE, ScriptScope("isolated", ("read_file", "deploy")),
                             approvals(), ApprovalState())
    assert "(deploy)" in unchecked.message and "isolation level" not in unchecked.message
    assert "code_execution.isolation" not in unchecked.message
    mcp = ScriptScope("isolated", ("read_file", "mcp_time_now"), also_checked=("mcp_time_now",))
    assert check_script(CODE, mcp, approvals(), ApprovalState()).allowed
    asked = check_script(CODE, ISOLATED, approvals(execute_code="ask"), ApprovalState())
    assert "approvals.execute_code is 'ask'" in asked.message
    allow = check_script(CODE, ISOLATED, approvals(mode="allow", execute_code="ask"),
                         ApprovalState())
    assert allow.allowed  # approvals.mode: allow approves what asking would


def test_nobody_to_ask_is_blocked() -> None:
    v = check_script(CODE, NONE, approvals(), ApprovalState())
    assert not v.allowed and v.by == "nobody"
    assert v.message.startswith(UNATTENDED + "It needs approval and no user is present to "
                                "approve it (this session has no approver). The script would "
                                "run at isolation level 'none'")
    # an approver that passes ("not mine to decide") is nobody too
    assert check_script(CODE, NONE, approvals(), ApprovalState(),
                        approver=Host(None)).by == "nobody"


def test_session_policy_allow_approves() -> None:
    v = check_script(CODE, NONE, approvals(mode="allow"), ApprovalState())
    assert v.allowed and v.by == "session-policy"


def test_user_denies() -> None:
    v = check_script(CODE, NONE, approvals(), ApprovalState(), approver=Host(Decision.DENY))
    assert not v.allowed and v.by == "host"
    assert v.message == "BLOCKED: the user denied this execute_code script. " + DO_NOT_RETRY


def test_session_approval_is_remembered_under_execute_code() -> None:
    state = ApprovalState()
    host = Host(Decision.SESSION)
    for _ in range(3):
        v = check_script(CODE, NONE, approvals(), state, session="s1", approver=host)
        assert v.allowed
    assert host.asked == 1 and state.approved("s1", "execute_code")
    assert v.by == "remembered"
    # another session is asked again; "once" is not remembered
    once = Host(Decision.ONCE)
    check_script(CODE, NONE, approvals(), state, session="s2", approver=once)
    check_script(CODE, NONE, approvals(), state, session="s2", approver=once)
    assert once.asked == 2
    # the session's memory does not outlive forget_session
    state.forget_session("s1")
    assert not check_script(CODE, NONE, approvals(), state, session="s1").allowed


def test_concurrent_calls_ask_once() -> None:
    state = ApprovalState()
    release = threading.Event()

    class Slow(Host):
        def decide(self, request: ApprovalRequest) -> Answer | None:
            assert release.wait(10)
            return super().decide(request)

    host = Slow(Decision.SESSION)
    verdicts = []
    threads = [threading.Thread(target=lambda: verdicts.append(check_script(
        CODE, NONE, approvals(), state, session="s", approver=host))) for _ in range(4)]
    for t in threads:
        t.start()
    release.set()
    for t in threads:
        t.join(10)
    assert len(verdicts) == 4 and all(v.allowed for v in verdicts) and host.asked == 1


def test_always_is_persisted_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("# mine\napprovals:\n  mode: ask\n")
    state = ApprovalState()
    host = Host(Decision.ALWAYS)
    v = check_script(CODE, NONE, approvals(), state, session="a", approver=host,
                     persist=lambda key: persist_allowlist(path, key))
    assert v.allowed and v.decision is Decision.ALWAYS
    assert check_script(CODE, NONE, approvals(), state, session="b").allowed  # process-wide
    cfg = load(path)
    assert cfg.approvals.command_allowlist == ("execute_code",)
    assert path.read_text().startswith("# mine\n")
    # a new process reading that config approves without asking anyone
    assert check_script(CODE, NONE, cfg.approvals, ApprovalState()).by == "remembered"


def test_a_failing_persist_keeps_the_approval() -> None:
    def broken(key: str) -> None:
        raise OSError("read-only file system")

    v = check_script(CODE, NONE, approvals(), ApprovalState(), approver=Host(Decision.ALWAYS),
                     persist=broken)
    assert v.allowed


def test_smart_classifier_assesses_the_script_text() -> None:
    seen: list[ApprovalRequest] = []

    def classifier(verdict: str):
        def classify(request: ApprovalRequest) -> str:
            seen.append(request)
            return verdict
        return classify

    smart = approvals(mode="smart")
    code = "API_KEY = 'sk-abcdefghijklmnop1234'\nimport shutil; shutil.rmtree('/srv')\n"
    host = Host(Decision.ONCE)
    v = check_script(code, NONE, smart, ApprovalState(), approver=host,
                     classifier=classifier("approve"))
    assert v.allowed and v.by == "smart" and host.asked == 0
    # it is given the raw script (what runs), marked as a script
    assert seen[0].kind == "script" and seen[0].command == code
    assert seen[0].descriptions == ("execute_code script execution",)
    v = check_script(code, NONE, smart, ApprovalState(), approver=host,
                     classifier=classifier("deny"))
    assert not v.allowed and v.by == "smart" and host.asked == 0
    assert v.message == ("BLOCKED by smart approval: this execute_code script was assessed as "
                         "dangerous. Do NOT retry it or rephrase it.")
    v = check_script(code, NONE, smart, ApprovalState(), approver=host,
                     classifier=classifier("escalate"))
    assert v.allowed and host.asked == 1
    # escalated with nobody behind: blocked
    assert check_script(code, NONE, smart, ApprovalState(),
                        classifier=classifier("escalate")).by == "nobody"
    # the classifier is consulted only in smart mode
    before = len(seen)
    check_script(code, NONE, approvals(), ApprovalState(), approver=host,
                 classifier=classifier("deny"))
    assert len(seen) == before


def test_an_approver_that_raises_denies() -> None:
    class Broken(Host):
        def decide(self, request: ApprovalRequest) -> Answer | None:
            raise RuntimeError("socket closed")

    v = check_script(CODE, NONE, approvals(), ApprovalState(), approver=Broken(None))
    assert not v.allowed and v.message.startswith("BLOCKED: the user denied")


def test_prompt_shows_the_redacted_script_and_offers_four_answers() -> None:
    code = ("token = 'abcd1234efgh'\nheaders = {'Authorization': 'Bearer "
            "abcdefghijklmnopqrstuvwxyz'}\nprint('hello')\n")
    r, w = os.pipe()
    with os.fdopen(r, "r") as rin, os.fdopen(w, "w") as win:
        win.write("s\n")
        win.flush()
        out = io.StringIO()
        v = check_script(code, NONE, approvals(), ApprovalState(),
                         approver=PromptApprover(rin, out, timeout=5))
    shown = out.getvalue()
    assert v.allowed and v.decision is Decision.SESSION and v.by == "prompt"
    assert "execute_code wants to run this Python script (execute_code script execution)" \
        in shown
    assert "    token = '[REDACTED]'\n" in shown and "abcd1234efgh" not in shown
    assert "{'Authorization': '[REDACTED]'}" in shown
    assert "abcdefghijklmnopqrstuvwxyz" not in shown
    assert "    print('hello')\n" in shown
    assert "[o]nce / [s]ession / [a]lways / [d]eny" in shown


def test_prompt_timeout_is_blocked_on_a_real_pty() -> None:
    master, slave = pty.openpty()
    try:
        with os.fdopen(os.dup(slave), "r") as tty_in:
            v = check_script(CODE, NONE, approvals(), ApprovalState(),
                             approver=PromptApprover(tty_in, io.StringIO(), timeout=0.2))
    finally:
        os.close(master)
        os.close(slave)
    assert not v.allowed and v.by == "prompt"
    assert v.message == ("BLOCKED: nobody approved this execute_code script within 0.2s. "
                         + DO_NOT_RETRY + " Silence is not consent.")


def test_callback_timeout_is_blocked() -> None:
    async def silent(request: ApprovalRequest) -> str:
        await asyncio.sleep(10)
        return "once"

    v = check_script(CODE, NONE, approvals(), ApprovalState(),
                     approver=CallbackApprover(silent, timeout=0.1))
    assert not v.allowed and v.by == "callback"
    assert v.message.startswith("BLOCKED: nobody approved this execute_code script within "
                                "0.1s.") and "Silence is not consent." in v.message


def test_callback_host_sees_a_script_request() -> None:
    seen: list[ApprovalRequest] = []

    async def relay(request: ApprovalRequest) -> str:
        seen.append(request)
        return "always"

    code = "password = 'hunter2hunter2'\nprint(1)\n"
    v = check_script(code, NONE, approvals(), ApprovalState(), session="chat-7",
                     approver=CallbackApprover(relay))
    assert v.allowed and v.decision is Decision.ALWAYS
    (req,) = seen
    assert (req.kind, req.session, req.command) == ("script", "chat-7", code)
    assert req.shown == "password = '[REDACTED]'\nprint(1)\n"


def test_redact_script_keeps_ordinary_code() -> None:
    code = "limit = 'five'\nkey = 'abc'\nprint(os.environ['HOME'])\n"
    assert redact_script(code) == code  # short values and ordinary names stay
    assert redact_script('GITHUB_TOKEN = "ghp_abcdefghijklmnopqrstuvwx"') == \
        'GITHUB_TOKEN = "[REDACTED]"'
    # key-shaped values are masked wherever they stand
    assert "sk-abcdefghijklmnop1234" not in redact_script("call('sk-abcdefghijklmnop1234')")
