"""The behavioural cases every entry point must treat alike, and what each must give.

A case is a script (or, for the argument checks, a raw ``execute_code`` argument object),
the configuration group it runs in, and what its result must be: status, the output text
(normalised, see :func:`normalise`), and what the error, hint or notice must say. Every
entry point (``columns.py``) runs every case; the expectation is one per case, so equal
expectations met mean equal behaviour. Where an entry point differs on purpose, the
difference is listed in :data:`DOCUMENTED` with the reason, and only there.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: a background process the "background child" case starts: unique per run, so the check
#: that none is left finds this run's only
SLEEP_SECONDS = "299.71"
#: config group "main": what the cases run under
TIMEOUT = 6
MAX_TOOL_CALLS = 2
MAX_STDOUT = 2000
MEMORY_MB = 256
#: a file of the project (the working directory), read by the tool-call cases
DATA = "hello from the project\n"


@dataclass(frozen=True)
class Observed:
    """What an entry point gave back, as the model would read it (its JSON)."""

    status: str
    output: str
    error: str = ""
    hint: str = ""
    notice: str = ""
    tool_calls: int = 0
    truncated: bool = False
    full_output_path: str = ""
    oom_killed: bool = False
    duration: float = 0.0

    @classmethod
    def of(cls, payload: dict[str, Any]) -> Observed:
        return cls(status=payload.get("status", ""), output=payload.get("output", ""),
                   error=payload.get("error") or "", hint=payload.get("hint") or "",
                   notice=payload.get("notice") or "",
                   tool_calls=int(payload.get("tool_calls_made") or 0),
                   truncated=bool(payload.get("stdout_truncated")),
                   full_output_path=payload.get("full_output_path") or "",
                   oom_killed=bool(payload.get("oom_killed") or payload.get("oom_kills")),
                   duration=float(payload.get("duration_seconds") or 0.0))


Check = Callable[[Observed, str], None]


@dataclass(frozen=True)
class Case:
    name: str
    #: the script, or the whole argument object of an ``execute_code`` call
    code: str | None = None
    arguments: dict[str, Any] | None = None
    #: "main" or "deny" (approvals.execute_code: deny)
    group: str = "main"
    status: str = "success"
    #: the whole output, normalised; None: not compared whole (see ``check``)
    output: str | None = None
    #: more to check: ``check(observed, column)`` asserts
    check: Check | None = None
    #: the kind of entry points it concerns: "all", or "model" (where a model's call
    #: arrives: the execute_code tool, the MCP server, the SSH host's tool)
    where: str = "all"
    tags: tuple[str, ...] = field(default=())

    def args(self) -> dict[str, Any]:
        return self.arguments if self.arguments is not None else {"code": self.code}


_FILE_LINE = re.compile(r'File "[^"]*", line (\d+)')


def normalise(text: str) -> str:
    """Traceback file names differ by runner (see :data:`DOCUMENTED`): one name for all."""
    return _FILE_LINE.sub(r'File "<script>", line \1', text)


STDERR = "\n\n--- stderr ---\n"


def _tool_error(o: Observed, column: str) -> None:
    assert o.error.strip().endswith("ValueError: boom"), o.error


def _syntax(o: Observed, column: str) -> None:
    assert "SyntaxError" in o.error, o.error


def _timeout(o: Observed, column: str) -> None:
    assert o.error.startswith(f"Script timed out after {TIMEOUT}s and was "), o.error
    assert o.output.endswith(o.error)


def _truncated(o: Observed, column: str) -> None:
    assert o.truncated and o.full_output_path, o
    assert o.hint.startswith("Print less"), o.hint


def _budget(o: Observed, column: str) -> None:
    assert o.tool_calls == MAX_TOOL_CALLS, o


def _oom(o: Observed, column: str) -> None:
    assert o.oom_killed, o
    assert o.hint == (f"A process of the script was killed: out of memory (limit {MEMORY_MB} "
                      "MiB, code_execution.memory_mb)."), o.hint


def _blocked(o: Observed, column: str) -> None:
    assert o.error.startswith("BLOCKED: execute_code runs arbitrary local Python"), o.error
    assert "approvals.execute_code is 'deny'" in o.error


def _background(o: Observed, column: str) -> None:
    assert o.duration < TIMEOUT - 1, o  # nothing waited for the sleeping child


def _bad_code(o: Observed, column: str) -> None:
    assert o.error == ("'code' must be a string of Python source, got list; send the whole "
                       "script as one string."), o.error


def _misnamed(o: Observed, column: str) -> None:
    assert o.error == "No code provided. Put the script in 'code' (this call sent 'command').", \
        o.error


CASES = [
    Case("plain output", 'print("hi")', output="hi\n"),
    Case("output then an exception", 'print("a")\nraise ValueError("boom")', status="error",
         output=('a\n' + STDERR + 'Traceback (most recent call last):\n'
                 '  File "<script>", line 2, in <module>\n    raise ValueError("boom")\n'
                 'ValueError: boom'), check=_tool_error),
    Case("syntax error", "print(1", status="error", check=_syntax,
         output=(STDERR + '  File "<script>", line 1\n    print(1\n         ^\n'
                 "SyntaxError: '(' was never closed")),
    Case("timeout after printing", 'import time\nprint("start")\ntime.sleep(60)',
         status="timeout", check=_timeout),
    Case("output over the cap", 'print("x" * 5000)', check=_truncated),
    Case("a tool call", 'from hermes_tools import read_file\n'
         'print(read_file("data.txt")["content"])', output=f"     1|{DATA}"),
    Case("an MCP tool call", 'from hermes_tools import mcp\n'
         'print(mcp.toy.echo(text="ping", times=2))', output="{'result': 'pingping'}\n"),
    Case("budget exhausted", 'from hermes_tools import read_file\nfor i in range(3):\n'
         '    print(read_file("data.txt").get("error", "ok"))',
         output=("ok\nok\nTool call limit reached (2). No more tool calls allowed in this "
                 "execution.\n"), check=_budget),
    # shared anonymous memory: RLIMIT_DATA does not count it, the cgroup does, so the
    # kernel's OOM killer (not a MemoryError) ends the child
    Case("OOM in a child process", "import subprocess, sys\n"
         "HOG = 'import mmap\\nm = mmap.mmap(-1, 1 << 30)\\n"
         "for i in range(0, len(m), 4096): m[i] = 1'\n"
         "r = subprocess.run([sys.executable, '-c', HOG])\n"
         "print('child', r.returncode)", output="child -9\n", check=_oom),
    Case("a blocked script", 'print("never")', group="deny", status="error", output="",
         check=_blocked, where="model"),
    Case("a background child left running",
         f'import subprocess\nsubprocess.Popen(["sleep", "{SLEEP_SECONDS}"])\nprint("started")',
         output="started\n", check=_background, tags=("leftover",)),
    Case("code that is not text", arguments={"code": ["print(1)"]}, status="error",
         output="", check=_bad_code, where="model"),
    Case("the script sent as command", arguments={"command": "print(1)"}, status="error",
         output="", check=_misnamed, where="model"),
]

#: entry points and what they are
COLUMNS = {
    "oneshot": "Engine.execute(code)",
    "session": "Engine.execute(code, session=...): a session cell",
    "tool": "registry.dispatch('execute_code', ...): the model's path (a session cell)",
    "mcp": "`execengine mcp` over stdio, through the official MCP client",
    "batch": "`execengine batch` on a JSONL file of tasks",
    "ssh": "the execute_code tool on a registry whose host is a real sshd on loopback",
}
#: entry points where a model's call arrives (the whole-script gate, the argument checks)
MODEL_COLUMNS = ("tool", "mcp", "ssh")

#: the differences on purpose: (case, column) -> why. Nothing else may differ.
DOCUMENTED: dict[tuple[str, str], str] = {
    ("a blocked script", "oneshot"): "the host calls the engine itself: no model's script "
    "to gate (the gate guards execute_code calls from a model)",
    ("a blocked script", "session"): "as for oneshot",
    ("a blocked script", "batch"): "the operator submitted the tasks: no gate, as for oneshot",
    ("OOM in a child process", "ssh"): "the remote applies no memory limit of ours (no "
    "cgroup there): the child is not killed (docs/remote.md)",
}
#: the timeout's second half: a one-shot child is killed, a session cell is interrupted
#: in place and its state kept (the result says which); both start "Script timed out
#: after Ns and was " and end the output after the ⏰ mark
ONE_SHOT_COLUMNS = ("oneshot", "batch")
