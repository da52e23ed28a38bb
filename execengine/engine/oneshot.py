"""The one-shot runner: one child for one plan, supervised to its end.

The child runs the bootstrap (``sandbox/bootstrap.py``) on the staged script; it says ready
on a watchdog socket whose end tells it the host is gone. :func:`run_once` supervises it
(:func:`execengine.launch.supervise.supervise`: pipes, deadlines, the kill escalation) and
hands the outcome to :func:`~execengine.engine.result.build_result`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from typing import TYPE_CHECKING

from execengine.engine.plan import ExecutionPlan, script_call_handler
from execengine.engine.prepare import (
    BOOTSTRAP_ENTRY,
    SCRIPT_NAME_VAR,
    Staging,
    launch_child,
    script_context,
)
from execengine.engine.result import EndReason, ExecutionResult, RunOutcome, build_result
from execengine.launch.supervise import Outcome, OutputCapture, supervise

if TYPE_CHECKING:
    from execengine.engine.core import Engine


def run_once(engine: Engine, plan: ExecutionPlan) -> ExecutionResult:
    """Run ``plan``'s code in a child of its own; the child and everything it started are
    gone when this returns."""
    started = time.monotonic()
    ce = engine.config.code_execution
    stdout = OutputCapture(ce.max_stdout_bytes, spill=True, spill_dir=engine.spill_dir)
    stderr = OutputCapture(ce.max_stderr_bytes, name="stderr")
    with contextlib.ExitStack() as stack:
        # set when the execution ends, however: a tool call still running for it (a
        # terminal command a script left behind) is stopped, not left to its own timeout
        ended = threading.Event()
        stack.callback(ended.set)
        staging = stack.enter_context(Staging(plan.code))
        # the watchdog socket: the child says ready on it, and EOF on it tells the child
        # the host is gone (a socket pair, so one descriptor serves both directions)
        watch_host, watch_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        stack.callback(watch_host.close)  # EOF for the child's watchdog, at the latest
        watch_r = watch_child.detach()
        try:
            launched = launch_child(
                engine, plan, stack, staging,
                argv=[plan.interpreter, "-c", BOOTSTRAP_ENTRY, staging.script_path],
                handler=lambda policy, workdir: script_call_handler(
                    engine.registry, script_context(engine, plan, policy, workdir, ended)),
                max_tool_calls=ce.max_tool_calls, pass_fds=(watch_r,),
                extra_env={"EXECENGINE_WATCHDOG_FD": str(watch_r),
                           SCRIPT_NAME_VAR: plan.filename}, prestart=True)
        finally:
            os.close(watch_r)
        outcome = supervise(launched.child, stdout=stdout, stderr=stderr,
                            timeout=plan.timeout, kill_grace=ce.kill_grace,
                            interrupt=plan.interrupt, ready=watch_host,
                            hello_timeout=ce.hello_timeout)
        calls = launched.channel.tool_calls_made
    return build_result(_outcome(outcome), stdout.result(), stderr.result(),
                        timeout=plan.timeout, tools=plan.tools, tool_calls=calls,
                        duration=time.monotonic() - started, memory_mb=ce.memory_mb,
                        hello_timeout=ce.hello_timeout)


def _outcome(o: Outcome) -> RunOutcome:
    ran: EndReason = "exit" if o.said_ready else "no_runtime"
    reason: EndReason = ran if o.reason == "exited" else o.reason
    return RunOutcome(reason, o.exit_code, failed=o.exit_code != 0, oom_kills=o.oom_kills,
                      ended_by=o.ended_by)
