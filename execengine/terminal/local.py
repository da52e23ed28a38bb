"""The local backend: ``bash`` on this machine, one new session per command, guarded
(:mod:`.guard`) so that none outlives a killed host."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from collections.abc import Mapping

from execengine.errors import TerminalError
from execengine.terminal import procs
from execengine.terminal._pump import drain, pump
from execengine.terminal.backend import (
    INTERRUPTED_EXIT_CODE,
    INTERRUPTED_TEXT,
    TIMEOUT_EXIT_CODE,
    CommandResult,
    ProcessInfo,
    TerminalBackend,
)
from execengine.terminal.background import BackgroundTable
from execengine.terminal.guard import CommandGuard
from execengine.terminal.output import HeadTail, Ring


def exit_code_of(returncode: int | None) -> int:
    """Shell convention: killed by signal N is 128 + N."""
    if returncode is None:
        return -1
    return 128 - returncode if returncode < 0 else returncode


def find_bash() -> str | None:
    return shutil.which("bash")


class _Background:
    """One background process: a pump thread fills its ring buffer."""

    def __init__(self, proc_id: str, task: str, command: str, cwd: str,
                 sp: procs.Spawned, buffer_chars: int) -> None:
        self.id, self.task, self.command, self.cwd, self.sp = proc_id, task, command, cwd, sp
        self.started = time.time()
        self.ring = Ring(buffer_chars)
        self.cursor = 0
        self.done = threading.Event()
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"terminal-{proc_id}",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            _, reader = pump(self.sp, self.ring.write, cancel=self._cancel)
            procs.kill_rest(self.sp)  # cancelled, or what it left behind in its group
            drain(reader)
        finally:
            self.sp.close_fds()
            self.sp.release()
            self.done.set()

    def info(self) -> ProcessInfo:
        code = self.sp.popen.poll() if self.done.is_set() else None
        return ProcessInfo(
            id=self.id, command=self.command, pid=self.sp.pid, cwd=self.cwd,
            started=self.started, running=not self.done.is_set(),
            exit_code=None if code is None else exit_code_of(code), pty=self.sp.pty,
            output_chars=self.ring.end,
        )

    def stop(self, grace: float) -> None:
        if not self.done.is_set():
            procs.stop(self.sp, grace=grace)
        self._cancel.set()
        self._thread.join(timeout=10)


class LocalBackend(BackgroundTable[_Background], TerminalBackend):
    """Runs commands with ``bash -c`` in a new session; see :mod:`execengine.terminal.procs`.

    ``kill_grace`` is the time between SIGTERM and SIGKILL; ``buffer_chars`` the ring buffer
    of each background process; ``max_background`` the processes allowed at once.
    """

    def __init__(self, *, kill_grace: float = 2.0, buffer_chars: int = 200_000,
                 max_background: int = 16, bash: str | None = None) -> None:
        found = bash or find_bash()
        if not found:
            raise TerminalError("bash is not installed (the local terminal backend needs it)")
        self.bash = found
        self.kill_grace = kill_grace
        self.buffer_chars = buffer_chars
        #: stops this backend's commands should the host be killed (see :mod:`.guard`)
        self.guard = CommandGuard()
        BackgroundTable.__init__(self, max_background)

    # -- foreground -------------------------------------------------------------------

    def run(self, command: str, *, cwd: str, env: Mapping[str, str], timeout: float,
            max_output_chars: int, pty: bool = False,
            cancel: threading.Event | None = None) -> CommandResult:
        out = HeadTail(max_output_chars)
        t0 = time.monotonic()
        sp = self._spawn(command, cwd, env, pty)
        try:
            outcome, reader = pump(sp, out.feed, deadline=t0 + timeout, cancel=cancel)
            if outcome in ("timeout", "cancelled"):
                procs.stop(sp, grace=self.kill_grace)
            else:
                procs.kill_rest(sp)
            drain(reader)
            new_cwd = procs.read_pwd(sp)
        finally:
            sp.close_fds()
            if sp.popen.poll() is None:  # pragma: no cover - only on an exception above
                procs.kill_rest(sp)
            sp.release()
        duration = time.monotonic() - t0
        timed_out = outcome == "timeout"
        text = out.text()
        if timed_out:
            text += f"\n[Command timed out after {timeout:g}s and was killed.]"
            code = TIMEOUT_EXIT_CODE
        elif outcome == "cancelled":
            text += f"\n[{INTERRUPTED_TEXT}]"
            code = INTERRUPTED_EXIT_CODE
        else:
            code = exit_code_of(sp.popen.returncode)
        return CommandResult(
            output=text,
            exit_code=code,
            duration=duration,
            cwd=new_cwd if outcome == "exited" else None,
            timed_out=timed_out,
            truncated=out.truncated,
            total_chars=out.total,
        )

    def _spawn(self, command: str, cwd: str, env: Mapping[str, str],
               pty: bool) -> procs.Spawned:
        if not os.path.isdir(cwd):
            raise TerminalError(f"working directory does not exist: {cwd}")
        try:
            return procs.spawn(command, cwd=cwd, env=env, pty=pty, bash=self.bash,
                               guard=self.guard)
        except OSError as exc:
            raise TerminalError(f"cannot start bash: {exc}") from exc

    # -- background -------------------------------------------------------------------

    def start(self, command: str, *, task: str, cwd: str, env: Mapping[str, str],
              pty: bool = False) -> ProcessInfo:
        with self._lock:
            proc_id = self._new_id()
            sp = self._spawn(command, cwd, env, pty)
            bg = _Background(proc_id, task, command, cwd, sp, self.buffer_chars)
            self._procs[proc_id] = bg
        return bg.info()

    def kill(self, proc_id: str, *, task: str) -> ProcessInfo:
        bg = self._get(proc_id, task)
        bg.stop(self.kill_grace)
        return bg.info()

    def signal(self, proc_id: str, sig: int, *, task: str) -> None:
        """Send ``sig`` once to every process of the command (e.g. SIGINT to a server)."""
        bg = self._get(proc_id, task)
        if not bg.done.is_set():
            bg.sp.processes.signal(sig)

    def close_task(self, task: str) -> None:
        self._stop_all(self._take(task))

    def close(self) -> None:
        self._stop_all(self._take(None))
        self.guard.close()

    def _stop_all(self, bgs: list[_Background]) -> None:
        live = [b for b in bgs if not b.done.is_set()]
        for b in live:  # SIGTERM them all first, so the grace periods overlap
            b.sp.processes.signal(signal.SIGTERM)
        for b in bgs:
            b.stop(self.kill_grace)
