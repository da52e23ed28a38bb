"""Who says yes: the :class:`Approver` interface and its implementations.

An approver answers an :class:`ApprovalRequest` with an :class:`Answer` (once, for this
session, always, or deny), or with ``None``: "not mine to decide, ask the next one".
:class:`ChainApprover` asks a list in order, so a smart classifier can escalate to a human
and a human-less host falls through to the policy from config.
"""

from __future__ import annotations

import abc
import asyncio
import enum
import os
import select
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

from execengine._asyncbridge import bridge


class Decision(str, enum.Enum):
    ONCE = "once"
    SESSION = "session"
    ALWAYS = "always"
    DENY = "deny"


@dataclass(frozen=True)
class ApprovalRequest:
    #: the command, or for ``kind="script"`` the script's source (what a classifier assesses)
    command: str
    #: descriptions of the dangerous patterns the command matched (and that are not approved)
    descriptions: tuple[str, ...]
    session: str = "default"
    origin: str = "agent"
    #: "command" (a terminal command) or "script" (a whole ``execute_code`` script)
    kind: str = "command"
    #: what to show a person (secret-looking values redacted); ``command`` when empty
    display: str = ""

    @property
    def shown(self) -> str:
        return self.display or self.command


@dataclass(frozen=True)
class Answer:
    decision: Decision
    reason: str = ""
    #: which approver answered ("prompt", "callback", "smart", "policy")
    by: str = ""
    #: a deny because nobody answered in time (silence is not consent)
    timed_out: bool = False

    @property
    def approved(self) -> bool:
        return self.decision is not Decision.DENY


class Approver(abc.ABC):
    @abc.abstractmethod
    def decide(self, request: ApprovalRequest) -> Answer | None:
        """An answer, or ``None`` to pass the request to the next approver."""


def how_to_allow(descriptions: Sequence[str]) -> str:
    listed = ", ".join(repr(d) for d in descriptions)
    return (f"To allow it: run from a host that can ask you (e.g. the CLI), add {listed} to "
            "approvals.command_allowlist in config.yaml, or set approvals.mode: allow.")


class PolicyApprover(Approver):
    """The non-interactive policy of ``approvals.mode``: allow, deny, or ask-with-nobody."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def decide(self, request: ApprovalRequest) -> Answer:
        what = ", ".join(request.descriptions)
        if self.mode == "allow":
            return Answer(Decision.ONCE, "approvals.mode is 'allow'", "policy")
        if self.mode == "deny":
            return Answer(Decision.DENY, f"dangerous command refused ({what}): approvals.mode "
                          "is 'deny'. " + how_to_allow(request.descriptions), "policy")
        return Answer(Decision.DENY, f"dangerous command needs approval ({what}) and no "
                      "approver is available to ask. " + how_to_allow(request.descriptions),
                      "policy")


class ChainApprover(Approver):
    def __init__(self, approvers: Sequence[Approver]) -> None:
        self.approvers = list(approvers)

    def decide(self, request: ApprovalRequest) -> Answer | None:
        for approver in self.approvers:
            answer = approver.decide(request)
            if answer is not None:
                return answer
        return None


_WORDS = {"o": Decision.ONCE, "once": Decision.ONCE, "y": Decision.ONCE, "yes": Decision.ONCE,
          "s": Decision.SESSION, "session": Decision.SESSION,
          "a": Decision.ALWAYS, "always": Decision.ALWAYS,
          "d": Decision.DENY, "deny": Decision.DENY, "n": Decision.DENY, "no": Decision.DENY}


def parse_decision(text: Any) -> Decision | None:
    """``"once"``/``"o"``/``"yes"``/``True``, ``"session"``, ``"always"``, ``"deny"``/``False``."""
    if isinstance(text, Decision):
        return text
    if isinstance(text, bool):
        return Decision.ONCE if text else Decision.DENY
    if isinstance(text, str):
        return _WORDS.get(text.strip().lower())
    return None


class PromptApprover(Approver):
    """Asks on a terminal (or any pair of streams): ``[o]nce / [s]ession / [a]lways / [d]eny``.

    Reads a line from ``input`` within ``timeout`` seconds (no answer, end of input or three
    unreadable answers deny). A stream with a file descriptor is read unbuffered, so the
    timeout holds for real pipes and PTYs. A script (``kind="script"``) is shown whole, with
    secret-looking values redacted (``request.display``).
    """

    def __init__(self, input: IO[str], output: IO[str], *, timeout: float = 60.0,
                 attempts: int = 3) -> None:
        self.input, self.output, self.timeout, self.attempts = input, output, timeout, attempts

    def decide(self, request: ApprovalRequest) -> Answer:
        if request.kind == "script":
            code = "\n".join("    " + line for line in request.shown.splitlines())
            self.output.write(f"\n⚠️  execute_code wants to run this Python script "
                              f"({', '.join(request.descriptions)}):\n{code}\n")
        else:
            self.output.write(f"\n⚠️  Dangerous command ({', '.join(request.descriptions)}):\n"
                              f"    {request.shown}\n")
        deadline = time.monotonic() + self.timeout
        for _ in range(self.attempts):
            self.output.write("Allow? [o]nce / [s]ession / [a]lways / [d]eny: ")
            self.output.flush()
            line = self._readline(deadline)
            if line is _TIMED_OUT:
                self.output.write("\n")
                return Answer(Decision.DENY, f"no answer within {self.timeout:g}s", "prompt",
                              timed_out=True)
            if line is None:
                self.output.write("\n")
                return Answer(Decision.DENY, "no answer (input closed)", "prompt")
            decision = parse_decision(line)
            if decision is not None:
                return Answer(decision, "answered at the prompt", "prompt")
            self.output.write(f"Not understood: {line.strip()!r}\n")
        return Answer(Decision.DENY, "no valid answer", "prompt")

    def _readline(self, deadline: float) -> str | None:
        """A line; ``None`` at end of input; :data:`_TIMED_OUT` past the deadline."""
        try:
            fd = self.input.fileno()
        except (AttributeError, OSError, ValueError):
            line = self.input.readline()
            return line or None
        buf = b""
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                return _TIMED_OUT
            poller = select.poll()  # never select(): fds above 1023 are normal in a host
            poller.register(fd, select.POLLIN)
            if not poller.poll(left * 1000):
                return _TIMED_OUT
            try:
                chunk = os.read(fd, 1)
            except OSError:  # EIO: the other side of a PTY went away
                chunk = b""
            if not chunk:
                return buf.decode("utf-8", "replace") or None
            buf += chunk
        return buf.decode("utf-8", "replace")


#: returned by :meth:`PromptApprover._readline` when the deadline passed (compared by identity)
_TIMED_OUT = "\x00timed out"


class CallbackApprover(Approver):
    """For hosts that relay the question elsewhere (a chat platform): ``await
    callback(request)`` returns ``"once"``/``"session"``/``"always"``/``"deny"`` (or a bool,
    or a :class:`Decision`); ``None`` passes to the next approver. No answer within
    ``timeout`` denies."""

    def __init__(self, callback: Callable[[ApprovalRequest], Awaitable[Any]], *,
                 timeout: float = 60.0) -> None:
        self.callback, self.timeout = callback, timeout

    async def adecide(self, request: ApprovalRequest) -> Answer | None:
        try:
            raw = await asyncio.wait_for(self.callback(request), self.timeout)
        except asyncio.TimeoutError:
            return Answer(Decision.DENY, f"no answer within {self.timeout:g}s", "callback",
                          timed_out=True)
        if raw is None:
            return None
        decision = parse_decision(raw)
        if decision is None:
            return Answer(Decision.DENY, f"unrecognised answer {raw!r}", "callback")
        return Answer(decision, "answered by the host", "callback")

    def decide(self, request: ApprovalRequest) -> Answer | None:
        return bridge().run(self.adecide(request))


#: ``classifier(request)`` returns "approve", "deny" or "escalate"
Classifier = Callable[[ApprovalRequest], str]


class SmartApprover(Approver):
    """A pluggable classifier decides the clear cases; the rest (``"escalate"``, anything
    unrecognised, or a classifier error) go to the next approver."""

    def __init__(self, classifier: Classifier) -> None:
        self.classifier = classifier

    def decide(self, request: ApprovalRequest) -> Answer | None:
        try:
            verdict = str(self.classifier(request)).strip().lower()
        except Exception:
            return None
        if verdict == "approve":
            return Answer(Decision.ONCE, "approved by the classifier", "smart")
        if verdict == "deny":
            return Answer(Decision.DENY, "denied by the classifier", "smart")
        return None
