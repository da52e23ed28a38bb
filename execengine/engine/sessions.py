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
from dataclasses import dataclass
from typing import TYPE_CHECKING

from execengine._runtime import entry_program
from execengine.confine.policy import ExecutionPolicy
from execengine.engine.kernel import EXIT_WAIT, CellOutcome, KernelProcess
from execengine.engine.plan import ExecutionPlan, script_call_handler
from execengine.engine.prepare import Staging, launch_child, script_context
from execengine.engine.result import (
    INTERRUPTED,
    STATE_KEPT,
    ExecutionResult,
    RunOutcome,
    SessionState,
    build_result,
    no_code_result,
)
from execengine.errors import SandboxError
from execengine.launch.supervise import OutputCapture
from execengine.rpc.channel import Channel

if TYPE_CHECKING:
    from execengine.engine.core import Engine

log = logging.getLogger(__name__)

#: the kernel's ``python -c`` program (the same text as ``sandbox/kernel.py``'s ``ENTRY``)
KERNEL_ENTRY = entry_program("kernel")
#: reasons remembered for sessions whose kernel was closed, to tell their next call
MAX_REMEMBERED = 1024


@dataclass(frozen=True)
class KernelKey:
    """What a kernel is made for; a change of any field starts a new kernel."""

    mode: str
    interpreter: str
    cwd: str  # "" in strict mode (a private directory per kernel)
    tools: tuple[str, ...]

    @classmethod
    def of(cls, plan: ExecutionPlan) -> KernelKey:
        return cls(plan.mode, plan.interpreter, plan.workdir, plan.tools)

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
        #: OOM kills counted so far (a cell's are the difference)
        self.oom_seen = 0

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
        #: notified when a cell ends or a kernel closes: a cell waiting for room looks again
        self._room = threading.Condition(self._lock)

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

    def run(self, plan: ExecutionPlan) -> ExecutionResult:
        """Run ``plan`` as a cell of its session (see the module docstring)."""
        assert plan.session is not None
        started = time.monotonic()
        if not plan.has_code and not plan.reset:
            return no_code_result()
        session = self._claim(plan.session)
        try:
            if not self._acquire(session, started + plan.timeout, plan.interrupt):
                waited = time.monotonic() - started
                if plan.interrupt is not None and plan.interrupt.is_set():
                    return ExecutionResult("interrupted", output=INTERRUPTED,
                                           error=INTERRUPTED, duration_seconds=waited)
                msg = (f"Script timed out after {plan.timeout:g}s waiting for the session's "
                       "previous cell to finish; it did not run. " + STATE_KEPT)
                return ExecutionResult("timeout", output=msg, error=msg,
                                       duration_seconds=waited)
            try:
                if session.retired:  # closed while we waited: a fresh session
                    left = max(0.1, plan.timeout - (time.monotonic() - started))
                    return self.run(dataclasses.replace(plan, timeout=left))
                return self._run_locked(session, plan, started)
            finally:
                session.last_used = time.monotonic()
                session.lock.release()
        finally:
            with self._lock:
                session.in_use -= 1
                session.last_used = time.monotonic()
                self._room.notify_all()

    def _run_locked(self, session: _Session, plan: ExecutionPlan,
                    started: float) -> ExecutionResult:
        engine = self.engine
        ce = engine.config.code_execution
        key = KernelKey.of(plan)
        notice = self._prepare(session, key, plan.reset)
        if not plan.has_code:
            return ExecutionResult("success", notice="The session was reset.",
                                   duration_seconds=time.monotonic() - started)
        kernel = session.kernel or self._new_kernel(session, key, plan, started)
        if isinstance(kernel, str):
            if notice is not None:
                session.notice = notice  # still true for the cell that does run
            return ExecutionResult("error", error=kernel, notice=notice,
                                   duration_seconds=time.monotonic() - started)
        # the cell's tool calls: as a one-shot script's; stopped when the cell ends
        cell_ended = threading.Event()
        handler = script_call_handler(engine.registry, script_context(
            engine, plan, kernel.policy, kernel.workdir, cell_ended))
        left = max(0.0, plan.timeout - (time.monotonic() - started))
        stdout = OutputCapture(ce.max_stdout_bytes, spill=True, spill_dir=engine.spill_dir)
        stderr = OutputCapture(ce.max_stderr_bytes, name="stderr")
        # the cell's call credential: its tool calls carry it (see Channel.open_cell)
        credential = secrets.token_hex(16)
        kernel.channel.open_cell(handler, ce.max_tool_calls, credential)
        try:
            outcome = kernel.process.run(plan.code, stdout=stdout, stderr=stderr,
                                         timeout=left, grace=ce.kill_grace,
                                         interrupt=plan.interrupt, credential=credential)
        finally:
            kernel.channel.close_cell()
            cell_ended.set()
        if not outcome.state_lost:
            kernel.process.sweep()
        kernel.cells += 1
        calls = kernel.channel.tool_calls_made
        oom = self._cell_oom_kills(kernel, outcome)
        lost = kernel.process.closed_streams
        if lost and not outcome.state_lost and notice is None:
            notice = (f"A cell of this session closed its {' and '.join(lost)}: what "
                      "it prints is lost. Call with reset=true to start fresh.")
        if outcome.state_lost or self._closed:
            self._drop_kernel(session)
        return build_result(_run_outcome(outcome, oom), stdout.result(), stderr.result(),
                            timeout=plan.timeout, tools=plan.tools, tool_calls=calls,
                            duration=time.monotonic() - started, memory_mb=ce.memory_mb,
                            hello_timeout=ce.hello_timeout, notice=notice)

    @staticmethod
    def _cell_oom_kills(kernel: _Kernel, outcome: CellOutcome) -> int:
        """The OOM kills of this cell: the kernel's cgroup counts them all its life."""
        if outcome.reason == "died":
            return outcome.oom_kills
        total = kernel.process.child.oom_kills()
        cell, kernel.oom_seen = max(0, total - kernel.oom_seen), total
        return cell

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

    def _new_kernel(self, session: _Session, key: KernelKey, plan: ExecutionPlan,
                    started: float) -> _Kernel | str:
        """Under the session's lock: start its kernel within ``max_sessions`` (waiting, up
        to the cell's own deadline, for another session's cell to end); why not."""
        if not self._reserve(session, started + plan.timeout, plan.interrupt):
            limit = self.engine.config.code_execution.max_sessions
            waited = time.monotonic() - started
            return (f"All {limit} session kernels (code_execution.max_sessions) were running "
                    f"cells for the {waited:.0f}s this call could wait; it did not run. Try "
                    "again when one has finished, or raise code_execution.max_sessions.")
        kernel: _Kernel | str | None = None
        try:
            kernel = self._start(key, plan)
        finally:
            if not isinstance(kernel, _Kernel):
                with self._lock:
                    session.reserved = False
                    self._room.notify_all()
        if isinstance(kernel, _Kernel):
            session.kernel = kernel
        return kernel

    def _drop_kernel(self, session: _Session) -> None:
        kernel, session.kernel = session.kernel, None
        with self._lock:
            session.reserved = False
            self._room.notify_all()
        if kernel is not None:
            kernel.close()

    # -- capacity ---------------------------------------------------------------------------

    def _reserve(self, session: _Session, deadline: float,
                 interrupt: threading.Event | None) -> bool:
        """Count ``session`` against ``max_sessions``, evicting idle ones (least recently
        used first); while every other kernel is running a cell, wait for one to end
        (until ``deadline``); False if none did."""
        limit = self.engine.config.code_execution.max_sessions
        victims: list[_Session] = []
        with self._lock:
            while True:
                if self._closed:
                    raise SandboxError("the engine is closed")
                live = sorted((s for s in self._sessions.values()
                               if s.reserved and s is not session), key=lambda s: s.last_used)
                excess = len(live) + 1 - limit
                idle = [s for s in live if s.in_use == 0]
                if excess <= len(idle):
                    break
                left = deadline - time.monotonic()
                if left <= 0 or (interrupt is not None and interrupt.is_set()):
                    return False
                self._room.wait(min(left, 0.25))
            for s in idle[:max(0, excess)]:  # least recently used first
                victims.append(s)
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

    def _start(self, key: KernelKey, plan: ExecutionPlan) -> _Kernel | str:
        """A started kernel, or why it did not start (:class:`SandboxError` when the
        launcher could not start it at all)."""
        ce = self.engine.config.code_execution
        with contextlib.ExitStack() as stack:
            staging = stack.enter_context(Staging(""))
            cmd_r, cmd_w = os.pipe()
            reply_r, reply_w = os.pipe()
            theirs = (cmd_r, reply_w)
            try:
                # a kernel lives longer than one timeout: CPU time is limited only when
                # code_execution.cpu_seconds is set
                launched = launch_child(
                    self.engine, plan, stack, staging,
                    argv=[key.interpreter, "-c", KERNEL_ENTRY], handler=None,
                    max_tool_calls=0, pass_fds=theirs,
                    extra_env={"EXECENGINE_KERNEL_FDS": f"{cmd_r},{reply_w}"},
                    cpu_seconds=ce.cpu_seconds)
            except BaseException:
                for fd in (cmd_w, reply_r):
                    os.close(fd)
                raise
            finally:
                for fd in theirs:
                    os.close(fd)
            process = KernelProcess(launched.child, cmd_w, reply_r)
            try:
                failure = process.wait_ready(ce.hello_timeout)
            except BaseException:
                process.close()
                raise
            if failure is not None:
                process.close()
                return failure
            resources = stack.pop_all()
        return _Kernel(key, process, launched.channel, staging, resources, launched.policy,
                       launched.workdir)


def _run_outcome(outcome: CellOutcome, oom_kills: int) -> RunOutcome:
    """A cell's outcome in the terms every runner's result is built from."""
    state: SessionState = "lost" if outcome.state_lost else "kept"
    if outcome.reason == "died":
        return RunOutcome("died", outcome.exit_code, failed=True, state="lost",
                          oom_kills=oom_kills)
    if outcome.reason in ("timeout", "interrupted"):
        return RunOutcome(outcome.reason, None, failed=True, state=state,
                          oom_kills=oom_kills)
    return RunOutcome("exit", outcome.exit_code, failed=outcome.status != "ok", state=state,
                      oom_kills=oom_kills)
