"""The ``terminal`` and ``process`` tools (toolset ``terminal``).

``terminal(command, timeout=None, workdir=None, background=False, pty=False)`` runs a shell
command after the approval check (:func:`execengine.approval.check_command`) and returns
``{"output", "exit_code", "duration_seconds", "cwd", ...}``; with ``background`` it returns a
``session_id`` that ``process`` manages (list / poll / log / wait / kill). Scripts inside
execute_code may run foreground commands only.
"""

from __future__ import annotations

import os
from typing import Any

from execengine.approval.gate import check_command
from execengine.config import MAX_TIMEOUT, Config, is_timeout
from execengine.confine.policy import ExecutionPolicy, policy_of
from execengine.context import ToolContext
from execengine.discovery import ToolSpecs
from execengine.errors import TerminalError
from execengine.host.factory import terminal_available
from execengine.launch.base import Launcher
from execengine.policy import ToolPolicy
from execengine.terminal.backend import CommandResult, ProcessInfo
from execengine.terminal.confined import run_sandboxed
from execengine.terminal.session import TerminalService

specs = ToolSpecs()

TERMINAL_SCHEMA = {
    "description": "Run a shell command (bash) and return its output and exit code. The "
    "working directory persists between calls of the same task (cd sticks). Long-running "
    "programs (servers, watchers) should use background=true and the process tool. "
    "Dangerous commands need approval.",
    "parameters": {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command line to run"},
            "timeout": {"type": "integer", "minimum": 1,
                        "description": "Seconds before the command is killed"},
            "workdir": {"type": "string",
                        "description": "Directory to run in (default: the task's)"},
            "background": {"type": "boolean", "default": False,
                           "description": "Start without waiting; returns a session_id"},
            "pty": {"type": "boolean", "default": False,
                    "description": "Run in a pseudo-terminal (programs that need a TTY)"},
        },
        "required": ["command"],
    },
}

PROCESS_SCHEMA = {
    "description": "Manage background processes started with terminal(background=true): "
    "list them, poll status, read new output (log), wait for the end, or kill.",
    "parameters": {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["list", "poll", "log", "wait", "kill"]},
            "session_id": {"type": "string", "description": "The id terminal returned"},
            "timeout": {"type": "number", "minimum": 0,
                        "description": "wait: seconds to wait (default 30)"},
            "offset": {"type": "integer", "minimum": 0,
                       "description": "log: read from this offset (default: unread output)"},
        },
        "required": ["action"],
    },
}


def check_terminal(config: Config) -> bool | str:
    """The configured host's terminal (a remote's bash is checked by execengine doctor)."""
    return terminal_available(config)


def _service(ctx: ToolContext) -> TerminalService:
    return ctx.services.terminal


def _result(r: CommandResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "output": r.output,
        "exit_code": r.exit_code,
        "duration_seconds": round(r.duration, 2),
    }
    if r.cwd:
        out["cwd"] = r.cwd
    if r.truncated:
        out["truncated"] = True
        out["total_chars"] = r.total_chars
    if r.timed_out:
        out["timed_out"] = True
        out["error"] = r.output.rsplit("\n", 1)[-1].strip("[]")
    return out


def _proc(info: ProcessInfo) -> dict[str, Any]:
    return {"session_id": info.id, "command": info.command, "pid": info.pid,
            "status": "running" if info.running else "exited", "exit_code": info.exit_code,
            "cwd": info.cwd, "pty": info.pty, "output_chars": info.output_chars}


def _refused(message: str, status: str) -> dict[str, Any]:
    return {"output": "", "exit_code": -1, "error": message, "status": status}


def _int_arg(args: dict[str, Any], name: str) -> float | None:
    value = args.get(name)
    if value is None:
        return None
    if not is_timeout(value):
        raise ValueError(f"{name} must be a positive number of seconds, at most "
                         f"{MAX_TIMEOUT:g}, got {value!r}")
    return float(value)


def _sandbox(ctx: ToolContext) -> tuple[Launcher, ExecutionPolicy] | None:
    """Where this call's command must run: a script's in its execution's sandbox; the
    agent's in the ``terminal.isolation`` sandbox, if configured; else None (the host, or
    the remote of ``terminal.backend: ssh``, which has no sandbox layers of ours)."""
    policy = policy_of(ctx)
    if ctx.origin == "execute_code":
        launcher = ctx.call.sandbox_launcher
        if policy is not None and launcher is not None and policy.level != "none":
            return launcher, policy
        return None
    sandbox = ctx.services.agent_sandbox()
    if sandbox is None:
        return None
    agent_launcher = sandbox.launcher()
    if agent_launcher is None or agent_launcher.level == "none":
        return None
    return agent_launcher, sandbox.policy()


def terminal(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        return _refused("command must be a non-empty string", "error")
    background, pty = bool(args.get("background")), bool(args.get("pty"))
    if ctx.origin == "execute_code" and (background or pty):
        return _refused("background and pty are not available from execute_code scripts; "
                        "run foreground commands only (or call terminal directly)", "error")
    try:
        timeout = _int_arg(args, "timeout")
    except ValueError as exc:
        return _refused(str(exc), "error")
    workdir = args.get("workdir")
    if workdir is not None and not isinstance(workdir, str):
        return _refused("workdir must be a string", "error")
    if ctx.origin == "execute_code" and workdir is None:
        # the execution's working directory (on a remote, the task's, where cd sticks)
        workdir = ctx.services.host.script_command_dir(ctx.call.cwd)
    sandbox = _sandbox(ctx)
    verdict = check_command(command, ctx, sandboxed=sandbox is not None)
    if not verdict.allowed:
        return _refused(verdict.message, verdict.status)
    svc = _service(ctx)
    if sandbox is not None:
        if background or pty:
            return _refused("background and pty are not available in the sandboxed "
                            "terminal (terminal.isolation)", "error")
        launcher, policy = sandbox
        try:
            cwd = svc.resolve_dir(ctx.task_key, workdir) if ctx.origin == "agent" else (
                os.path.join(policy.cwd, os.path.expanduser(workdir)) if workdir
                else policy.cwd)
            result = run_sandboxed(
                launcher, command, config=ctx.config, policy=policy, cwd=cwd,
                timeout=timeout or ctx.config.terminal.timeout,
                max_output_chars=ctx.config.terminal.max_output_chars,
                passthrough=tuple(ctx.registry.env_passthrough),
                interrupt=ctx.call.interrupt)
        except TerminalError as exc:
            return _refused(str(exc), "error")
        if (ctx.origin == "agent" and result.cwd and os.path.isdir(result.cwd)
                and policy.root_of(os.path.realpath(result.cwd), write=False)):
            svc.dirs.set(ctx.task_key, result.cwd)  # cd sticks (within the roots)
        return {**_result(result), "sandbox": policy.level}
    try:
        if background:
            info = svc.start(ctx.task_key, command, workdir=workdir, pty=pty)
            return {**_proc(info), "output": "", "exit_code": None}
        result = svc.run(ctx.task_key, command, timeout=timeout, workdir=workdir, pty=pty,
                         interrupt=ctx.call.interrupt)
    except TerminalError as exc:
        return _refused(str(exc), "error")
    return _result(result)


def process(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    action = args.get("action")
    backend = _service(ctx).backend
    task = ctx.task_key
    if action == "list":
        return {"processes": [_proc(p) for p in backend.processes(task)]}
    if action not in ("poll", "log", "wait", "kill"):
        return {"error": f"unknown action {action!r}; use list, poll, log, wait or kill"}
    proc_id = args.get("session_id")
    if not isinstance(proc_id, str) or not proc_id:
        return {"error": f"action {action!r} needs session_id"}
    try:
        if action == "poll":
            info = backend.poll(proc_id, task=task)
            return {**_proc(info), "output_tail": backend.read(proc_id, task=task,
                                                                since=max(0, info.output_chars
                                                                          - 2000)).text}
        if action == "log":
            offset = args.get("offset")
            chunk = backend.read(proc_id, task=task,
                                 since=offset if isinstance(offset, int) else None)
            out = {"session_id": proc_id, "output": chunk.text, "offset": chunk.offset}
            if chunk.dropped:
                out["dropped_chars"] = chunk.dropped
            return out
        if action == "wait":
            timeout = args.get("timeout", 30)
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
                return {"error": f"timeout must be a number, got {timeout!r}"}
            info = backend.wait(proc_id, task=task, timeout=min(float(timeout), 3600.0))
            return {**_proc(info), "timed_out": info.running}
        return _proc(backend.kill(proc_id, task=task))
    except KeyError:
        known = [p.id for p in backend.processes(task)]
        return {"error": f"no background process {proc_id!r} in this task; known: "
                         f"{', '.join(known) or 'none'}"}


#: scripts run foreground commands only: the background and pty parameters are hidden
specs.register("terminal", "terminal", TERMINAL_SCHEMA, terminal, check_fn=check_terminal,
               emoji="💻", policy=ToolPolicy(script_callable=True,
                                            hidden_params=frozenset({"background", "pty"})))
specs.register("process", "terminal", PROCESS_SCHEMA, process, check_fn=check_terminal,
               emoji="⚙️")
