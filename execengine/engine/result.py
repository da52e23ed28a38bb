"""The outcome of one execution, and the JSON the model sees.

A script that raises, times out, is interrupted or hits a limit is a normal
:class:`ExecutionResult`; only the engine's own breakage raises. :meth:`ExecutionResult.to_json`
is the edge where the typed value becomes the model-facing text, with the messages scripts
written for ``hermes_tools`` expect.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from execengine.proctree import EndedBy

Status = Literal["success", "error", "timeout", "interrupted"]

NO_CODE = "No code provided."
INTERRUPTED = "[execution interrupted — user sent a new message]"
#: before the timeout message where it ends ``output``
TIMEOUT_MARK = "⏰ "
STDERR_HEADER = "\n\n--- stderr ---\n"


def timeout_message(seconds: float) -> str:
    return f"Script timed out after {seconds:g}s and was killed."


def exit_message(code: int) -> str:
    return f"Script exited with code {code}"


def with_stderr(output: str, stderr: str) -> str:
    """A failed script's output with its stderr (the traceback) after it, so a host that
    shows only ``output`` still shows why it failed."""
    return output + STDERR_HEADER + stderr.strip("\n") if stderr.strip() else output


def oom_message(memory_mb: int | None, who: str = "Script") -> str:
    """The kernel's OOM killer ended ``who`` (the script, or one of its processes)."""
    limit = f"limit {memory_mb} MiB" if memory_mb else "no limit set"
    return f"{who} was killed: out of memory ({limit}, code_execution.memory_mb)."


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
