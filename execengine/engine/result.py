"""The outcome of one execution, and the JSON the model sees.

A script that raises, times out, is interrupted or hits a limit is a normal
:class:`ExecutionResult`; only the engine's own breakage raises. A one-shot child and a
session's cell both end in a :class:`RunOutcome`, and :func:`build_result` alone turns it
and the captured streams into the result: output with stderr, truncation and spill,
timeout text, OOM, ``ended_by``, hints and notices read the same whichever ran the script.
:meth:`ExecutionResult.to_json` is the edge where the typed value becomes the model-facing
text, with the messages scripts written for ``hermes_tools`` expect.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from execengine.launch.supervise import Captured, oom_message
from execengine.proctree import EndedBy

Status = Literal["success", "error", "timeout", "interrupted"]

NO_CODE = "No code provided."
INTERRUPTED = "[execution interrupted — user sent a new message]"
#: before the timeout message where it ends ``output``
TIMEOUT_MARK = "⏰ "
STDERR_HEADER = "\n\n--- stderr ---\n"
#: what a session cell's result adds to a timeout or interrupt
STATE_KEPT = "The session's state was kept."
STATE_LOST = ("The session's kernel was killed and its state was lost; the next call starts "
              "a fresh session.")


def timeout_message(seconds: float) -> str:
    return f"Script timed out after {seconds:g}s and was killed."


def in_place_timeout_message(seconds: float) -> str:
    """A session cell stopped in place at its deadline (the kernel lives on)."""
    return (f"Script timed out after {seconds:g}s and was interrupted (KeyboardInterrupt). "
            + STATE_KEPT)


def died_message(status: int | None) -> str:
    """A session's kernel exited during a cell."""
    how = (f"killed by signal {-status}" if status is not None and status < 0
           else f"exit code {status}")
    return (f"The session's kernel died during the cell ({how}; out of memory, os._exit or "
            "killed); its state was lost and the next call starts a fresh session.")


def exit_message(code: int) -> str:
    return f"Script exited with code {code}"


def with_stderr(output: str, stderr: str) -> str:
    """A failed script's output with its stderr (the traceback) after it, so a host that
    shows only ``output`` still shows why it failed."""
    return output + STDERR_HEADER + stderr.strip("\n") if stderr.strip() else output


def no_hello_message(seconds: float) -> str:
    return (f"The script's runtime did not connect to the host within {seconds:g}s "
            "(code_execution.hello_timeout) and was killed.")


def no_runtime_message(exit_code: int | None, stderr: str) -> str:
    """The child ended without its runtime ever saying it started."""
    detail = stderr.strip().splitlines()[-1] if stderr.strip() else (
        f"exit status {exit_code}" if exit_code is not None else "no exit status")
    return ("The script's runtime never started: the interpreter ended before it said "
            f"ready ({detail}).")


@dataclass(frozen=True)
class ExecutionResult:
    status: Status
    output: str = ""
    stderr: str = ""
    exit_code: int | None = None
    tool_calls_made: int = 0
    duration_seconds: float = 0.0
    error: str | None = None
    stdout_truncated: bool = False
    stdout_bytes_total: int = 0
    stdout_bytes_omitted: int = 0
    stderr_truncated: bool = False
    stderr_bytes_total: int = 0
    #: the full stdout, when it was truncated (or its first bytes, see below)
    full_output_path: str | None = None
    #: False when the output outgrew the spill file's cap: the file then holds only the
    #: first ``full_output_bytes`` bytes
    full_output_complete: bool = True
    full_output_bytes: int = 0
    hint: str | None = None
    #: set when nothing started: "approval" (the whole-script gate) or "hook" (a
    #: ``pre_tool_call`` hook); the reason is in ``error``
    refused_by: str | None = None
    #: sessions: what happened to the session's state before this cell (reset, replaced,
    #: closed, died), when the model should know
    notice: str | None = None
    #: which step of the shutdown ladder ended the script: "exit" (by itself),
    #: "sigterm" (within the grace after the timeout's or interrupt's SIGTERM), "kill"
    #: (the kill-all); None where nothing ran, and for session cells (a kernel outlives them)
    ended_by: EndedBy | None = None
    #: processes of the script the kernel's OOM killer ended (counted through the
    #: execution's cgroup at ``restricted``/``isolated``; always 0 at ``none``)
    oom_kills: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "success"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_model_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": self.status,
            "output": self.output,
            "tool_calls_made": self.tool_calls_made,
            "duration_seconds": round(self.duration_seconds, 2),
        }
        if self.exit_code is not None:
            out["exit_code"] = self.exit_code
        if self.error:
            out["error"] = self.error
        if self.stderr and self.status == "success":
            out["stderr"] = self.stderr  # warnings are kept on success too
        if self.stdout_truncated:
            out["stdout_truncated"] = True
            out["stdout_bytes_total"] = self.stdout_bytes_total
            out["stdout_bytes_captured"] = self.stdout_bytes_total - self.stdout_bytes_omitted
            out["stdout_bytes_omitted"] = self.stdout_bytes_omitted
            if self.full_output_path:
                out["full_output_path"] = self.full_output_path
                if not self.full_output_complete:
                    out["full_output_complete"] = False
                    out["full_output_bytes"] = self.full_output_bytes
        if self.stderr_truncated:
            out["stderr_truncated"] = True
        if self.hint:
            out["hint"] = self.hint
        if self.refused_by:
            out["refused_by"] = self.refused_by
        if self.notice:
            out["notice"] = self.notice
        # extra fields only when they say something (the reference's readers ignore them)
        if self.ended_by in ("sigterm", "kill"):
            out["ended_by"] = self.ended_by
        if self.oom_kills:
            out["oom_killed"] = True
        return out

    def to_json(self) -> str:
        """The text returned to the model for the ``execute_code`` tool."""
        return json.dumps(self.to_model_dict(), ensure_ascii=False)


def no_code_result() -> ExecutionResult:
    return ExecutionResult("error", error=NO_CODE)


def refused_result(message: str, by: str) -> ExecutionResult:
    """Nothing started: the approval gate or a ``pre_tool_call`` hook said no."""
    return ExecutionResult("error", error=message, refused_by=by)


_NAME_ERROR = re.compile(r"NameError: name '(\w+)' is not defined")
_IMPORT_ERROR = re.compile(r"ImportError: cannot import name '(\w+)' from 'hermes_tools'")
#: git refused by the read-only bind of a working directory's ``.git``
_GIT_READ_ONLY = re.compile(r"\.git/[^\s']*'?: Read-only file system")


def hint_for(result: ExecutionResult, allowed: Iterable[str]) -> str | None:
    """A one-line recovery hint for common mistakes, or None."""
    allowed = sorted(allowed)
    text = result.stderr
    m = _NAME_ERROR.search(text)
    if m and m.group(1) in allowed:
        return f"Import the tool first: from hermes_tools import {m.group(1)}"
    m = _IMPORT_ERROR.search(text)
    if m:
        return (f"'{m.group(1)}' is not available in this execution; available: "
                f"{', '.join(allowed) or 'none'}")
    if "ToolCallError" in text:
        return "A tool call could not reach the host; the result above says why."
    if _GIT_READ_ONLY.search(text) or _GIT_READ_ONLY.search(result.output):
        return ("The repository's .git is read-only in the sandbox (docs/confinement.md): "
                "run git commands that write (add, commit, checkout) outside the execution.")
    if result.status == "timeout":
        return ("Do less per execution, or run slow tool calls concurrently (threads or "
                "`from hermes_tools import aio`).")
    if result.stdout_truncated:
        where = ""
        if result.full_output_path:
            what = ("full output" if result.full_output_complete
                    else f"first {result.full_output_bytes:,} bytes of the output")
            where = f" ({what}: {result.full_output_path})"
        return f"Print less: summarise or filter inside the script{where}."
    return None


#: how a run ended: by itself ("exit"), at its deadline, interrupted, its runtime never
#: connected ("no_hello") or never started ("no_runtime"), or a session's kernel died
EndReason = Literal["exit", "timeout", "interrupted", "no_hello", "no_runtime", "died"]
#: a session cell's state after it: None for a one-shot run
SessionState = Literal["kept", "lost"] | None


@dataclass(frozen=True)
class RunOutcome:
    """How a one-shot child or a session cell ended, as :func:`build_result` needs it."""

    reason: EndReason
    exit_code: int | None = 0
    #: the script raised or exited with a non-zero status
    failed: bool = False
    #: sessions: whether the kernel (and the state) survived the cell
    state: SessionState = None
    #: processes of the run the kernel's OOM killer ended (where counted)
    oom_kills: int = 0
    ended_by: EndedBy | None = None


def build_result(outcome: RunOutcome, out: Captured, err: Captured, *, timeout: float,
                 tools: Iterable[str], tool_calls: int, duration: float,
                 memory_mb: int | None, hello_timeout: float,
                 notice: str | None = None) -> ExecutionResult:
    """The result of a run: the one wording of every outcome for every runner."""
    text, error, status = out.text, None, "success"
    exit_code = outcome.exit_code
    session = outcome.state is not None
    suffix = (" " + (STATE_LOST if outcome.state == "lost" else STATE_KEPT)) if session else ""
    if outcome.reason == "timeout":
        status = "timeout"
        error = (in_place_timeout_message(timeout) if outcome.state == "kept"
                 else timeout_message(timeout) + suffix)
        text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + TIMEOUT_MARK + error
    elif outcome.reason == "interrupted":
        status, error = "interrupted", INTERRUPTED + suffix
        text = (text.rstrip("\n") + "\n" if text.strip() else "") + error
    elif outcome.reason == "no_hello":
        status, error = "error", no_hello_message(hello_timeout)
    elif outcome.reason == "no_runtime":
        # the interpreter ended without running our runtime: whatever ran, it was not
        # the script as the engine runs it (a failed start, a planted module)
        status, error = "error", no_runtime_message(exit_code, err.text)
        text = with_stderr(text, err.text)
    elif outcome.reason == "died":
        status, error = "error", died_message(exit_code)
        if outcome.oom_kills:
            error = (oom_message(memory_mb, "The session's kernel") + " Its state was lost "
                     "and the next call starts a fresh session.")
        text = with_stderr(text, err.text)
    elif outcome.failed and outcome.oom_kills:
        status, error = "error", oom_message(memory_mb)
        text = with_stderr(text, err.text)
    elif outcome.failed:
        status = "error"
        error = err.text.strip() or exit_message(exit_code if exit_code is not None else 1)
        text = with_stderr(text, err.text)
    result = ExecutionResult(
        status=status,  # type: ignore[arg-type]
        output=text, stderr=err.text, exit_code=exit_code, tool_calls_made=tool_calls,
        duration_seconds=duration, error=error,
        stdout_truncated=out.truncated, stdout_bytes_total=out.total_bytes,
        stdout_bytes_omitted=out.omitted_bytes, stderr_truncated=err.truncated,
        stderr_bytes_total=err.total_bytes, full_output_path=out.spill_path,
        full_output_complete=out.spill_path is None or out.spill_complete,
        full_output_bytes=out.spill_bytes, ended_by=outcome.ended_by,
        oom_kills=outcome.oom_kills, notice=notice,
    )
    hint = hint_for(result, tools)
    if outcome.oom_kills and status != "error":
        # the script went on (a subprocess was the victim) or timed out: say so anyway
        hint = oom_message(memory_mb, "A process of the script")
    return replace(result, hint=hint) if hint else result
