"""Persistent sessions: named kernels whose ``__main__`` state survives between executions.

:meth:`Engine.execute(code, session="name") <execengine.engine.core.Engine.execute>` runs
``code`` as a cell of that session's kernel (:mod:`.kernel` on the host,
``sandbox/kernel.py`` in the child). A :class:`SessionManager` owns the kernels of one
engine:

- a kernel is started on a session's first cell, through the engine's launcher (same
  isolation level, same limits, except that the CPU-time limit applies only when
  ``code_execution.cpu_seconds`` is set: a kernel lives longer than one timeout);
- it is keyed by (mode, interpreter, working directory, allowed tools): when one of them
  changes, the session's kernel is replaced (the result's ``notice`` says why);
- cells of one session run one at a time (a second waits, bounded by its own timeout);
  different sessions run in parallel;
- each cell gets its own RPC authority and tool-call budget on the kernel's channel
  (:meth:`execengine.rpc.Channel.open_cell`);
- at most ``code_execution.max_sessions`` kernels live at once: the least recently used
  idle one is closed to make room (never one running a cell); a background reaper closes
  kernels idle for ``code_execution.session_idle_timeout`` seconds; the engine's close
  closes them all. A session whose kernel was closed or died says so on its next call,
  which starts a fresh kernel.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from execengine._runtime import entry_program
from execengine.childenv import build_child_env
from execengine.config import checked_timeout
from execengine.confine.policy import ExecutionPolicy
from execengine.context import CallContext
from execengine.engine import spill
from execengine.engine.allowed import function_schemas, script_call_handler
from execengine.engine.capture import OutputCapture
from execengine.engine.confinement import execution_policy
from execengine.engine.interpreter import choose
from execengine.engine.kernel import EXIT_WAIT, CellOutcome, KernelProcess
from execengine.engine.result import (
    INTERRUPTED,
    ExecutionResult,
    exit_message,
    hint_for,
    no_code_result,
    oom_message,
    timeout_message,
)
from execengine.engine.staging import Staging
from execengine.engine.stub import render_stub
from execengine.errors import SandboxError
from execengine.launch.base import LaunchSpec
from execengine.rpc.channel import Channel

if TYPE_CHECKING:
    from execengine.engine.core import Engine

log = logging.getLogger(__name__)

#: the kernel's ``python -c`` program (the same text as ``sandbox/kernel.py``'s ``ENTRY``)
KERNEL_ENTRY = entry_program("kernel")

STATE_KEPT = "The session's state was kept."
STATE_LOST = ("The session's kernel was killed and its state was lost; the next call starts "
              "a fresh session.")
#: reasons remembered for sessions whose kernel was closed, to tell their next call
MAX_REMEMBERED = 1024


def in_place_timeout_message(seconds: float) -> str:
    return (f"Script timed out after {seconds:g}s and was interrupted (KeyboardInterrupt). "
            + STATE_KEPT)


def died_message(status: int | None) -> str:
    how = (f"killed by signal {-status}" if status is not None and status < 0
           else f"exit code {status}")
    return (f"The session's kernel died during the cell ({how}; out of memory, os._exit or "
            "killed); its state was lost and the next call starts a fresh session.")


@dataclass(frozen=True)
class KernelKey:
    """What a kernel is made for; a change of any field starts a new kernel."""

    mode: str
    interpreter: str
    cwd: str  # "" in strict mode (a private directory per kernel)
    tools: tuple[str, ...]

    def changes(self, other: KernelKey) -> str:
        names = {"mode": "mode", "interpreter": "interpreter", "cwd": "working directory",
                 "tools": "set of allowed tools"}
        changed = [names[f.name] for f in dataclasses.fields(self)
                   if getattr(self, f.name) != getattr(other, f.name)]
        return ", ".join(changed)


@dataclass(frozen=True)
class SessionInfo:
    """One live session, as :meth:`SessionManager.list_sessions` reports it."""

    name: str
    pid: int | None
    cells: int
    busy: bool
    idle_seconds: float
    mode: str
    cwd: str
    tools: tuple[str, ...]


class _Kernel:
    """A started kernel with what it owns: its channel and staging directory."""

    def __init__(self, key: KernelKey, process: KernelProcess, channel: Channel,
                 staging: Staging, resources: contextlib.ExitStack,
                 policy: ExecutionPolicy, workdir: str) -> None:
        self.key, self.process, self.channel, self.staging = key, process, channel, staging
        self.policy, self.workdir = policy, workdir
        self._resources = resources  # the channel, staging and stub directories
        self.cells = 0

    def begin_close(self) -> None:
        self.process.begin_close()

    def close(self) -> None:
        try:
            self.process.close()
        finally:
            self._resources.close()


class _Session:
    def __init__(self, name: str) -> None:
        self.name = name
        self.lock = threading.Lock()  # held while a cell runs (or the kernel starts)
        self.kernel: _Kernel | None = None
        self.in_use = 0  # calls holding or waiting for the lock (under the manager's lock)
        self.reserved = False  # counts against max_sessions (under the manager's lock)
        self.retired = False  # removed from the manager: a caller must look it up again
        self.last_used = time.monotonic()
        self.notice: str | None = None  # for the next call (why the state was lost)


class SessionManager:
    """The sessions of one engine. Thread-safe; :meth:`close` is idempotent."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, _Session] = OrderedDict()  # LRU order
        self._gone: OrderedDict[str, str] = OrderedDict()
        self._closed = False
        self._stop = threading.Event()
        self._reaper: threading.Thread | None = None

    # -- public API -------------------------------------------------------------------------

    def list_sessions(self) -> list[SessionInfo]:
        """The sessions with a live kernel, least recently used first."""
        now = time.monotonic()
        with self._lock:
            items = [(s, s.kernel) for s in self._sessions.values()]
            busy = {s.name: s.in_use > 0 for s, _ in items}
        return [SessionInfo(s.name, k.process.pid, k.cells, busy[s.name],
                            now - s.last_used, k.key.mode, k.key.cwd, k.key.tools)
                for s, k in items if k is not None]

    def close_session(self, name: str) -> bool:
        """Close ``name``'s kernel (waiting for a running cell, bounded by the engine's
        timeout); False if there was none."""
        with self._lock:
            session = self._sessions.pop(name, None)
            if session is None:
                return False
            session.retired = True
        self._close_sessions([session], wait=self.engine.config.code_execution.timeout)
        return True

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            sessions = list(self._sessions.values())
            self._sessions.clear()
            for s in sessions:
                s.retired = True
        self._stop.set()
        ce = self.engine.config.code_execution
        # every kernel sees EOF first (they die in parallel); a running cell then ends as
        # "died" and releases its session, bounded
        self._close_sessions(sessions, wait=ce.kill_grace + 5.0)
        reaper = self._reaper
        if reaper is not None and reaper is not threading.current_thread():
            reaper.join(5.0)

    # -- running a cell ---------------------------------------------------------------------

    def run(self, name: str, code: str, *, reset: bool = False, task_id: str | None = None,
            cwd: str | None = None, enabled_toolsets: Iterable[str] | None = None,
            tools: Iterable[str] | None = None, interrupt: threading.Event | None = None,
            timeout: float | None = None, mode: str | None = None,
            context: CallContext | None = None) -> ExecutionResult:
        started = time.monotonic()
        engine = self.engine
        ce = engine.config.code_execution
        has_code = bool(code and code.strip())
        if not has_code and not reset:
            return no_code_result()
        mode = mode or ce.mode
        if mode not in ("project", "strict"):
            log.warning("unknown code_execution mode %r; using 'project'", mode)
            mode = "project"
        limit = ce.timeout if timeout is None else checked_timeout(timeout)
        names = engine.allowed_tools(enabled_toolsets, tools)
        call = context or CallContext()
        if interrupt is None:
            interrupt = call.interrupt
        task_id = task_id if task_id is not None else call.task_id
        cwd = cwd or call.cwd
        call = call.replace(task_id=task_id, cwd=os.path.abspath(cwd) if cwd else None)
        interpreter = choose(mode, configured=ce.python)
        key = KernelKey(mode, interpreter,
                        "" if mode == "strict" else engine.workdir_for(mode, cwd, task_id, ""),
                        tuple(names))
        session = self._claim(name)
        try:
            if not self._acquire(session, started + limit, interrupt):
                waited = time.monotonic() - started
                if interrupt is not None and interrupt.is_set():
                    return ExecutionResult("interrupted", output=INTERRUPTED,
                                           error=INTERRUPTED, duration_seconds=waited)
                msg = (f"Script timed out after {limit:g}s waiting for the session's previous "
                       "cell to finish; it did not run. " + STATE_KEPT)
                return ExecutionResult("timeout", output=msg, error=msg,
                                       duration_seconds=waited)
            try:
                if session.retired:  # closed while we waited: a fresh session
                    return self.run(name, code, reset=reset, task_id=task_id, cwd=cwd,
                                    enabled_toolsets=enabled_toolsets, tools=tools,
                                    interrupt=interrupt,
                                    timeout=max(0.1, limit - (time.monotonic() - started)),
                                    mode=mode, context=context)
                notice = self._prepare(session, key, reset)
                if not has_code:
                    return ExecutionResult("success", notice="The session was reset.",
                                           duration_seconds=time.monotonic() - started)
                kernel = session.kernel or self._new_kernel(session, key, names,
                                                            enabled_toolsets)
                if isinstance(kernel, str):
                    return ExecutionResult("error", error=kernel, notice=notice,
                                           duration_seconds=time.monotonic() - started)
                # the cell's tool calls: as a one-shot script's (see Engine.execute)
                # set when the cell ends: its tool calls still running are stopped
                cell_ended = threading.Event()
                cell_call = call.replace(
                    cwd=call.cwd or (kernel.workdir if kernel.policy.confined else None),
                    policy=kernel.policy, interrupt=cell_ended,
                    sandbox_launcher=engine.launcher if engine.launcher.level != "none"
                    else None)
                handler = script_call_handler(engine.registry, cell_call)
                left = max(0.0, limit - (time.monotonic() - started))
                stdout = OutputCapture(ce.max_stdout_bytes, spill=True, spill_dir=spill.spill_dir())
                stderr = OutputCapture(ce.max_stderr_bytes, name="stderr")
                kernel.channel.open_cell(handler, ce.max_tool_calls)
                try:
                    outcome = kernel.process.run(code, stdout=stdout, stderr=stderr,
                                                 timeout=left, grace=ce.kill_grace,
                                                 interrupt=interrupt)
                finally:
                    kernel.channel.close_cell()
                    cell_ended.set()
                if not outcome.state_lost:
                    kernel.process.sweep()
                kernel.cells += 1
                calls = kernel.channel.tool_calls_made
                lost = kernel.process.closed_streams
                if lost and not outcome.state_lost and notice is None:
                    notice = (f"A cell of this session closed its {' and '.join(lost)}: what "
                              "it prints is lost. Call with reset=true to start fresh.")
                if outcome.state_lost or self._closed:
                    self._drop_kernel(session)
                return _result(outcome, stdout, stderr, calls=calls, limit=limit,
                               names=names, notice=notice,
                               duration=time.monotonic() - started,
                               memory_mb=ce.memory_mb)
            finally:
                session.last_used = time.monotonic()
                session.lock.release()
        finally:
            with self._lock:
                session.in_use -= 1
                session.last_used = time.monotonic()

    def _claim(self, name: str) -> _Session:
        with self._lock:
            if self._closed:
                raise SandboxError("the engine is closed")
            session = self._sessions.get(name)
            if session is None:
                session = self._sessions[name] = _Session(name)
                session.notice = self._gone.pop(name, None)
            self._sessions.move_to_end(name)
            session.in_use += 1
            if self._reaper is None:
                self._reaper = threading.Thread(target=self._reap_loop, daemon=True,
                                                name="execengine-session-reaper")
                self._reaper.start()
        return session

    @staticmethod
    def _acquire(session: _Session, deadline: float,
                 interrupt: threading.Event | None) -> bool:
        if session.lock.acquire(blocking=False):
            return True
        while True:
            if interrupt is not None and interrupt.is_set():
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if session.lock.acquire(timeout=min(left, 0.05)):
                return True

    def _prepare(self, session: _Session, key: KernelKey, reset: bool) -> str | None:
        """Under the session's lock: decide whether its kernel can serve this call; the
        notice for the result when its state is gone."""
        notice, session.notice = session.notice, None
        kernel = session.kernel
        if kernel is None:
            return notice
        if reset:
            self._drop_kernel(session)
            return "The session was reset: this cell ran in a fresh session."
        if kernel.key != key:
            what = kernel.key.changes(key)
            self._drop_kernel(session)
            return (f"The {what} changed since the session's last call: this cell ran in a "
                    "fresh session (the previous state was lost).")
        if not kernel.process.alive():
            status = kernel.process.child.poll()
            self._drop_kernel(session)
            how = (f"killed by signal {-status}" if status is not None and status < 0
                   else f"exit code {status}")
            return (f"The session's kernel died between calls ({how}); its state was lost. "
                    "This cell ran in a fresh session.")
        return notice

    def _new_kernel(self, session: _Session, key: KernelKey, names: list[str],
                    enabled_toolsets: Iterable[str] | None) -> _Kernel | str:
        """Under the session's lock: start its kernel within ``max_sessions``; why not."""
        if not self._reserve(session):
            return (f"All {self.engine.config.code_execution.max_sessions} session kernels "
                    "(code_execution.max_sessions) are running cells; try again when one "
                    "has finished.")
        kernel: _Kernel | str | None = None
        try:
            kernel = self._start(key, names, enabled_toolsets)
        finally:
            if not isinstance(kernel, _Kernel):
                with self._lock:
                    session.reserved = False
        if isinstance(kernel, _Kernel):
            session.kernel = kernel
        return kernel

    def _drop_kernel(self, session: _Session) -> None:
        kernel, session.kernel = session.kernel, None
        with self._lock:
            session.reserved = False
        if kernel is not None:
            kernel.close()

    # -- capacity ---------------------------------------------------------------------------

    def _reserve(self, session: _Session) -> bool:
        """Count ``session`` against ``max_sessions``, evicting idle ones (least recently
        used first); False if every other kernel is running a cell."""
        limit = self.engine.config.code_execution.max_sessions
        victims: list[_Session] = []
        with self._lock:
            live = sorted((s for s in self._sessions.values()
                           if s.reserved and s is not session), key=lambda s: s.last_used)
            excess = len(live) + 1 - limit
            for s in live:  # least recently used first
                if excess <= 0:
                    break
                if s.in_use == 0:
                    victims.append(s)
                    excess -= 1
            if excess > 0:
                return False
            for s in victims:
                self._retire(s, "it was the least recently used of "
                                f"{limit} live sessions (code_execution.max_sessions)")
            session.reserved = True
        self._close_sessions(victims, wait=1.0)
        return True

    def _retire(self, session: _Session, why: str) -> None:
        # under self._lock
        self._sessions.pop(session.name, None)
        session.retired = True
        self._gone[session.name] = (f"The session's kernel was closed because {why}; its "
                                    "state was lost. This cell ran in a fresh session.")
        while len(self._gone) > MAX_REMEMBERED:
            self._gone.popitem(last=False)

    def _close_sessions(self, sessions: list[_Session], *, wait: float) -> None:
        kernels = [s.kernel for s in sessions if s.kernel is not None]
        for k in kernels:
            k.begin_close()
        for s in sessions:
            got = s.lock.acquire(timeout=min(wait, EXIT_WAIT))
            kernel = s.kernel
            if not got and kernel is not None:
                # a running cell whose kernel did not die on EOF (a thread holding the GIL)
                kernel.process.kill()
                got = s.lock.acquire(timeout=wait)
            try:
                kernel, s.kernel = s.kernel, None
                if kernel is not None:
                    try:
                        kernel.close()
                    except Exception:  # one kernel's trouble must not leak the others
                        log.warning("closing session %s failed", s.name, exc_info=True)
            finally:
                if got:
                    s.lock.release()

    # -- the reaper -------------------------------------------------------------------------

    def _reap_loop(self) -> None:
        idle = self.engine.config.code_execution.session_idle_timeout
        period = min(max(idle / 4, 0.05), 30.0)
        while not self._stop.wait(period):
            now = time.monotonic()
            with self._lock:
                victims = [s for s in self._sessions.values()
                           if s.in_use == 0 and s.kernel is not None
                           and now - s.last_used >= idle]
                for s in victims:
                    self._retire(s, f"it was idle for {idle:g}s "
                                    "(code_execution.session_idle_timeout)")
            if victims:
                self._close_sessions(victims, wait=1.0)

    # -- starting a kernel ------------------------------------------------------------------

    def _start(self, key: KernelKey, names: list[str],
               enabled_toolsets: Iterable[str] | None) -> _Kernel | str:
        """A started kernel, or why it did not start (:class:`SandboxError` when the
        launcher could not start it at all)."""
        engine = self.engine
        ce = engine.config.code_execution
        stub = render_stub(function_schemas(engine.registry, names, enabled_toolsets))
        exec_id, token, run_token = (secrets.token_hex(8), secrets.token_hex(32),
                                     secrets.token_hex(16))
        with contextlib.ExitStack() as stack:
            staging = stack.enter_context(Staging(""))
            stub_dir = stack.enter_context(engine.runtime.stub_dir(stub))
            channel = stack.enter_context(engine.server.open(
                exec_id=exec_id, token=token, allowed=names,
                handler=lambda tool, args: "{}", max_tool_calls=0, check_peer=True))
            channel.close_cell()  # no authority until a cell opens it
            workdir = key.cwd or staging.path
            # one policy for the kernel's life (see execengine.confine), as Engine.execute
            policy = execution_policy(engine.config, cwd=workdir, level=engine.launcher.level,
                                      extra_writable=(staging.path,), stack=stack)
            runtime = engine.runtime.path
            cmd_r, cmd_w = os.pipe()
            reply_r, reply_w = os.pipe()
            theirs = (cmd_r, reply_w)
            try:
                env = build_child_env(
                    os.environ, passthrough=engine.registry.env_passthrough, tz=ce.tz,
                    extra={
                        **engine.path_env(key.mode, stub_dir, runtime, workdir),
                        "EXECENGINE_RPC_ENDPOINT": channel.socket_path,
                        "EXECENGINE_RPC_TOKEN": token,
                        "EXECENGINE_EXEC_ID": exec_id,
                        "EXECENGINE_KERNEL_FDS": f"{cmd_r},{reply_w}",
                        "EXECENGINE_RUN_TOKEN": run_token,
                        # the reference system's names, as one-shot children get them
                        "HERMES_RPC_SOCKET": channel.socket_path,
                        "HERMES_RPC_TOKEN": token,
                        **policy.proxy_env(),
                    })
                limits = dataclasses.replace(engine.launch_limits(ce.timeout, policy),
                                             cpu_seconds=ce.cpu_seconds)
                spec = LaunchSpec(
                    argv=[key.interpreter, "-c", KERNEL_ENTRY],
                    env=env, cwd=workdir, run_token=run_token,
                    writable_paths=tuple(dict.fromkeys((
                        workdir, staging.path,
                        *(os.path.expanduser(p) for p in engine.config.policy.writable_roots
                          if os.path.isdir(os.path.expanduser(p)))))),
                    readable_paths=(staging.path, runtime),
                    socket_dir=channel.socket_dir, pass_fds=theirs,
                    protected_paths=policy.protected, hidden_paths=policy.denied_paths,
                    limits=limits)
                child = engine.launcher.launch(spec)
            except BaseException:
                for fd in (cmd_w, reply_r):
                    os.close(fd)
                raise
            finally:
                for fd in theirs:
                    os.close(fd)
            process = KernelProcess(child, cmd_w, reply_r)
            try:
                # only the kernel's uid may talk on its socket (SO_PEERCRED, checked first)
                slot_uid = getattr(child, "uid", None)
                channel.expect_peer([slot_uid if slot_uid is not None else os.geteuid()])
                failure = process.wait_ready(ce.hello_timeout)
            except BaseException:
                process.close()
                raise
            if failure is not None:
                process.close()
                return failure
            resources = stack.pop_all()
        return _Kernel(key, process, channel, staging, resources, policy, workdir)


def _result(outcome: CellOutcome, stdout: OutputCapture, stderr: OutputCapture, *,
            calls: int, limit: float, names: list[str], notice: str | None,
            duration: float, memory_mb: int | None = None) -> ExecutionResult:
    out, err = stdout.result(), stderr.result()
    text, error, status = out.text, None, "success"
    exit_code: int | None = outcome.exit_code
    if outcome.reason == "timeout":
        status = "timeout"
        error = (timeout_message(limit) + " " + STATE_LOST if outcome.state_lost
                 else in_place_timeout_message(limit))
        text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + error
        exit_code = None
    elif outcome.reason == "interrupted":
        status = "interrupted"
        error = INTERRUPTED + " " + (STATE_LOST if outcome.state_lost else STATE_KEPT)
        text = (text.rstrip("\n") + "\n" if text.strip() else "") + error
        exit_code = None
    elif outcome.reason == "died":
        status, error = "error", died_message(outcome.exit_code)
        if outcome.oom_kills:
            error = (oom_message(memory_mb, "The session's kernel") + " Its state was lost "
                     "and the next call starts a fresh session.")
    elif outcome.status != "ok":
        status = "error"
        error = err.text.strip() or exit_message(exit_code if exit_code is not None else 1)
    result = ExecutionResult(
        status=status,  # type: ignore[arg-type]
        output=text, stderr=err.text, exit_code=exit_code, tool_calls_made=calls,
        duration_seconds=duration, error=error,
        stdout_truncated=out.truncated, stdout_bytes_total=out.total_bytes,
        stdout_bytes_omitted=out.omitted_bytes, stderr_truncated=err.truncated,
        stderr_bytes_total=err.total_bytes, full_output_path=out.spill_path, notice=notice,
        oom_kills=outcome.oom_kills,
    )
    hint = hint_for(result, names)
    return dataclasses.replace(result, hint=hint) if hint else result
