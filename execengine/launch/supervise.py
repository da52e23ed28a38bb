"""Drive one started child to its end: read its output, enforce the deadlines, tear down.

One thread (the caller's) multiplexes both pipes with a selector, so output is read while
the script runs and reading never blocks on a descendant that keeps a pipe open: once the
main process has exited, everything of the execution is killed and the pipes are drained
for a bounded time. Timeout and interrupt escalate the same way: SIGTERM to all of it,
``kill_grace`` seconds, then the launcher's kill (SIGSTOP sweep, SIGKILL).
"""

from __future__ import annotations

import os
import selectors
import socket
import threading
import time
from dataclasses import dataclass
from typing import Literal

from execengine.launch.base import Child
from execengine.launch.capture import OutputCapture
from execengine.proctree import EndedBy

Reason = Literal["exited", "timeout", "interrupted", "no_hello"]

#: the byte the child's bootstrap writes on the watchdog socket once it runs
READY = b"R"
#: how often a running execution looks at its interrupt flag and hello deadline
TICK = 0.05
#: bound on draining the pipes after everything was killed
DRAIN_SECONDS = 2.0


def oom_message(memory_mb: int | None, who: str = "Script") -> str:
    """The kernel's OOM killer ended ``who`` (the script, or one of its processes)."""
    limit = f"limit {memory_mb} MiB" if memory_mb else "no limit set"
    return f"{who} was killed: out of memory ({limit}, code_execution.memory_mb)."


@dataclass(frozen=True)
class Outcome:
    reason: Reason
    exit_code: int | None
    ended_by: EndedBy = "exit"
    #: processes of the execution the kernel's OOM killer ended (where it can be counted)
    oom_kills: int = 0
    #: the child's runtime said :data:`READY` (True when there was no socket to say it on)
    said_ready: bool = True


class _Pipes:
    """The child's stdout and stderr, and optionally the socket it says ready on."""

    def __init__(self, child: Child, stdout: OutputCapture, stderr: OutputCapture,
                 ready: socket.socket | None = None) -> None:
        self.sel = selectors.DefaultSelector()
        self.caps: dict[int, OutputCapture] = {}
        for stream, cap in ((child.stdout, stdout), (child.stderr, stderr)):
            fd = stream.fileno()
            os.set_blocking(fd, False)
            self.sel.register(fd, selectors.EVENT_READ)
            self.caps[fd] = cap
        self.ready = ready is None
        self._ready_fd = -1
        if ready is not None:
            self._ready_fd = ready.fileno()
            os.set_blocking(self._ready_fd, False)
            self.sel.register(self._ready_fd, selectors.EVENT_READ)

    def _read_ready(self) -> None:
        try:
            data = os.read(self._ready_fd, 64)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data.startswith(READY):
            self.ready = True
        if self.ready or not data:  # said it, or closed without saying it
            self.sel.unregister(self._ready_fd)
            self._ready_fd = -1

    def settle_ready(self) -> None:
        """Read a :data:`READY` written just before the child ended (the loop may see the
        exit first)."""
        if not self.ready and self._ready_fd >= 0:
            self._read_ready()

    @property
    def open(self) -> bool:
        return bool(self.caps) or self._ready_fd >= 0

    def pump(self, timeout: float) -> None:
        """Read what is ready (waiting up to ``timeout``)."""
        if not self.caps and self._ready_fd < 0:
            time.sleep(max(0.0, timeout))
            return
        for key, _ in self.sel.select(max(0.0, timeout)):
            fd = key.fd
            if fd == self._ready_fd:
                self._read_ready()
                continue
            while True:
                try:
                    data = os.read(fd, 1 << 16)
                except BlockingIOError:
                    break
                except OSError:
                    data = b""
                if not data:
                    self.sel.unregister(fd)
                    del self.caps[fd]
                    break
                self.caps[fd].feed(data)
                if len(data) < 1 << 16:
                    break

    def drain(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while self.caps and time.monotonic() < end:
            self.pump(end - time.monotonic())

    def close(self) -> None:
        self.sel.close()


def supervise(
    child: Child,
    *,
    stdout: OutputCapture,
    stderr: OutputCapture,
    timeout: float,
    kill_grace: float,
    interrupt: threading.Event | None = None,
    ready: socket.socket | None = None,
    hello_timeout: float = 10.0,
) -> Outcome:
    """Run ``child`` to completion; always leaves nothing of it running.

    ``ready`` is the host's end of the watchdog socket: a child that has not written
    :data:`READY` on it within ``hello_timeout`` is killed (reason ``no_hello``)."""
    start = time.monotonic()
    deadline = start + timeout
    hello_deadline = start + hello_timeout
    pipes = _Pipes(child, stdout, stderr, ready)
    reason: Reason = "exited"
    try:
        while True:
            now = time.monotonic()
            if interrupt is not None and interrupt.is_set():
                reason = "interrupted"
                break
            if now >= deadline:
                reason = "timeout"
                break
            if not pipes.ready and now >= hello_deadline:
                reason = "no_hello"
                break
            if child.poll() is not None:
                break
            # the tick also notices a main process that exited while strays hold the pipes
            wait = min(deadline - now, TICK)
            if pipes.open:
                pipes.pump(wait)
            else:  # both pipes closed (by the script), the process still runs
                child.wait(min(wait, TICK))
        ended_by: EndedBy = "exit"
        if reason in ("timeout", "interrupted"):
            child.terminate()
            end = time.monotonic() + kill_grace
            while child.poll() is None and time.monotonic() < end:
                pipes.pump(min(TICK, end - time.monotonic()))
            ended_by = "sigterm"
        if child.poll() is None:
            ended_by = "kill"
        child.kill()  # the whole execution, strays included; bounded
        pipes.drain(DRAIN_SECONDS)
        pipes.settle_ready()
        # before the child's close(): that hands the cgroup to its teardown
        return Outcome(reason, child.poll(), ended_by, child.oom_kills(), pipes.ready)
    finally:
        pipes.close()
        child.close()
