"""Level ``none``: process hygiene without OS isolation.

The child runs as the host's user in a new session (its own process group), stdin from
``/dev/null``, the environment exactly as given (built from an allow-list by the engine),
every file descriptor closed except ``pass_fds``, and no ``preexec_fn`` (safe with threads).

Killing must also reach processes that left the group: the child-side bootstrap makes the
child a subreaper, so ``setsid`` and double-forked descendants reparent to it and stay in
its process tree; anything that escaped even that still carries ``EXECENGINE_RUN_TOKEN`` in
``/proc/<pid>/environ``. :meth:`LocalChild.kill` freezes the whole set with SIGSTOP until no
new member appears, then SIGKILLs it, all within a bounded time.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time

import psutil

from execengine.errors import SandboxError
from execengine.launch.base import Child, Launcher, LaunchSpec

log = logging.getLogger(__name__)

#: upper bound of one sweep (freeze rounds plus kill), seconds
SWEEP_SECONDS = 2.0
#: how long kill() waits for the main process to be reaped after SIGKILL
REAP_SECONDS = 2.0


def processes_with_token(run_token: str) -> list[psutil.Process]:
    """Live processes whose initial environment holds ``EXECENGINE_RUN_TOKEN=<run_token>``."""
    needle = b"\0EXECENGINE_RUN_TOKEN=" + run_token.encode() + b"\0"
    me = os.getpid()
    found: list[psutil.Process] = []
    try:
        pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:  # pragma: no cover - not Linux
        return found
    for pid in pids:
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                data = f.read()
        except OSError:
            continue
        if needle in b"\0" + data:
            with contextlib.suppress(psutil.Error):
                found.append(psutil.Process(pid))
    return found


class LocalChild(Child):
    def __init__(self, proc: subprocess.Popen[bytes], run_token: str) -> None:
        self._proc = proc
        self.pid = proc.pid
        assert proc.stdout is not None and proc.stderr is not None
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.run_token = run_token
        self._closed = False
        #: a sweep ran after the main process was reaped: nothing of the execution is
        #: left that a second sweep (a scan of every process's environment) could find
        self._swept = False
        try:
            self._root: psutil.Process | None = psutil.Process(proc.pid)
        except psutil.Error:  # pragma: no cover - exited and reaped already
            self._root = None

    def poll(self) -> int | None:
        return self._proc.poll()

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def members(self) -> list[psutil.Process]:
        """Every live process of this execution known right now (main one included)."""
        found: dict[int, psutil.Process] = {}
        if self._root is not None and self._proc.returncode is None:
            with contextlib.suppress(psutil.Error):
                found[self._root.pid] = self._root
                for p in self._root.children(recursive=True):
                    found[p.pid] = p
        for p in processes_with_token(self.run_token):
            found.setdefault(p.pid, p)
        return list(found.values())

    def _signal_group(self, sig: int) -> None:
        # Only while the main process is unreaped: then its pid (= the group id) cannot
        # have been reused. Group members left after it was reaped are found by token.
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)

    def terminate(self) -> None:
        self._signal_group(signal.SIGTERM)
        for p in self.members():
            with contextlib.suppress(psutil.Error):
                p.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        if self._swept:
            return
        reaped_before = self._proc.returncode is not None
        deadline = time.monotonic() + SWEEP_SECONDS
        frozen: dict[int, psutil.Process] = {}
        self._signal_group(signal.SIGSTOP)
        while True:
            fresh = [p for p in self.members() if p.pid not in frozen]
            if not fresh:
                break
            for p in fresh:
                with contextlib.suppress(psutil.Error):
                    p.send_signal(signal.SIGSTOP)
                frozen[p.pid] = p
            if time.monotonic() > deadline:
                log.warning("execution %s: process set still growing at kill deadline",
                            self.run_token)
                break
        self._signal_group(signal.SIGKILL)
        for p in frozen.values():
            with contextlib.suppress(psutil.Error):
                p.send_signal(signal.SIGKILL)
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
        self.wait(max(0.1, min(REAP_SECONDS, deadline + REAP_SECONDS - time.monotonic())))
        # wait (bounded) until the killed ones are really gone (reaped by their parents)
        gone_by = time.monotonic() + 1.0
        others = [p for pid, p in frozen.items() if pid != self.pid]
        while others and time.monotonic() < gone_by:
            others = [p for p in others if _alive(p)]
            if others:
                time.sleep(0.005)
        self._swept = reaped_before and not others

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.kill()
        finally:
            self.close_pipes()


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class LocalLauncher(Launcher):
    """Starts children with :mod:`subprocess` at isolation level ``none``."""

    level = "none"

    def launch(self, spec: LaunchSpec) -> LocalChild:
        if not spec.argv or not os.path.isabs(spec.argv[0]):
            raise SandboxError(f"the child's interpreter must be an absolute path, got "
                               f"{spec.argv[0] if spec.argv else None!r}")
        try:
            proc = subprocess.Popen(
                list(spec.argv),
                env=dict(spec.env),
                cwd=spec.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
                pass_fds=tuple(spec.pass_fds),
            )
        except OSError as exc:
            raise SandboxError(f"cannot start {spec.argv[0]}: {exc}") from exc
        return LocalChild(proc, spec.run_token)
