"""Drive one started child to its end: read its output, enforce the deadlines, tear down.

One thread (the caller's) multiplexes both pipes with a selector, so output is read while
the script runs and reading never blocks on a descendant that keeps a pipe open: once the
main process has exited, everything of the execution is killed and the pipes are drained
for a bounded time. Timeout and interrupt escalate the same way: SIGTERM to all of it,
``kill_grace`` seconds, then the launcher's kill (SIGSTOP sweep, SIGKILL).

Bounded capture of a child's output: head + tail in memory, everything else spilled.

An :class:`OutputCapture` keeps the first ``head`` bytes and a rolling window of the last
``tail`` bytes (40 % / 60 % of the limit). While the output fits the limit nothing touches
the disk; past it, the stream is written to a spill file whose path the result reports: the
whole output, or, past ``spill_limit`` bytes, its first ``spill_limit`` bytes (the result
and the marker say which). :func:`clean_text` turns the bytes into text for the
model: invalid UTF-8 replaced, ANSI escape sequences removed, secret-looking values redacted.

The truncation marker reads as the reference system's does, in characters
(``... [OUTPUT TRUNCATED - 582,112 chars omitted out of 630,034 total] ...``), followed by
where the full output is and exactly what that file holds.
"""

from __future__ import annotations

import os
import re
import selectors
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Literal

from execengine.ansi import strip_ansi
from execengine.launch.base import Child
from execengine.proctree import EndedBy
from execengine.truncation import marker_line

Reason = Literal["exited", "timeout", "interrupted", "no_hello"]

#: the byte the child's bootstrap writes on the watchdog socket once it runs
READY = b"R"
#: how often a running execution looks at its interrupt flag and hello deadline
TICK = 0.05
#: bound on draining the pipes after everything was killed
DRAIN_SECONDS = 2.0


# -- the output ----------------------------------------------------------------------


_SECRETS = re.compile(
    r"(?P<a>\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{16,})"
    r"|(?P<b>\bgh[pousr]_[A-Za-z0-9]{20,})"
    r"|(?P<c>\bAKIA[0-9A-Z]{16}\b)"
    r"|(?P<d>\bxox[abpr]-[A-Za-z0-9\-]{10,})"
    r"|(?P<e>\bAIza[0-9A-Za-z_\-]{35})"
    r"|(?i:(?P<f>\bbearer\s+)[A-Za-z0-9._\-]{16,})"
)


def redact(text: str) -> str:
    """Mask values that look like API keys or bearer tokens."""

    def sub(m: re.Match[str]) -> str:
        if m.group("f"):
            return m.group("f") + "[REDACTED]"
        return m.group(0)[:4] + "…[REDACTED]"

    return _SECRETS.sub(sub, text)


def clean_text(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    if "\x1b" in text or "\x9b" in text:  # what every sequence starts with (a scan in C)
        text = strip_ansi(text)
    return redact(text)


_CONTINUATION = bytes(range(0x80, 0xC0))


def char_count(data: bytes) -> int:
    """Characters in UTF-8 ``data``: every byte that does not continue a sequence."""
    return len(data.translate(None, _CONTINUATION))


@dataclass(frozen=True)
class Captured:
    text: str
    total_bytes: int
    kept_bytes: int
    truncated: bool
    spill_path: str | None = None
    #: bytes in the spill file: ``total_bytes`` when it holds the whole output
    spill_bytes: int = 0

    @property
    def spill_complete(self) -> bool:
        return self.spill_path is not None and self.spill_bytes == self.total_bytes

    @property
    def omitted_bytes(self) -> int:
        return self.total_bytes - self.kept_bytes


class OutputCapture:
    """Accumulates one stream. Not thread-safe (one reader feeds it)."""

    def __init__(self, limit: int, *, head_fraction: float = 0.4, spill: bool = False,
                 spill_dir: str | None = None, spill_limit: int = 64 * 1024 * 1024,
                 name: str = "stdout") -> None:
        self.limit = limit
        self.head_size = int(limit * head_fraction)
        self.tail_size = limit - self.head_size
        self._head = bytearray()
        self._tail = bytearray()
        self._all = bytearray()  # everything, while it fits the limit
        self.total = 0
        self.total_chars = 0
        self._spill_enabled = spill
        self._spill_dir = spill_dir
        self._spill_limit = spill_limit
        self._spill_fd: int | None = None
        self._spilled = 0
        self._spill_error: str | None = None
        self.spill_path: str | None = None
        self._name = name

    def feed(self, data: bytes) -> None:
        if not data:
            return
        before = self.total
        self.total += len(data)
        self.total_chars += char_count(data)
        if self.total <= self.limit:
            self._all += data
        else:
            if before <= self.limit:  # this chunk crosses the limit
                earlier, self._all = bytes(self._all), bytearray()
                self._open_spill()
                self._write_spill(earlier)
            self._write_spill(data)
        room = self.head_size - len(self._head)
        if room > 0:
            self._head += data[:room]
        if self.tail_size:
            self._tail += data[-self.tail_size:]
            if len(self._tail) > self.tail_size:
                del self._tail[: len(self._tail) - self.tail_size]

    def _open_spill(self) -> None:
        if not self._spill_enabled or self._spill_fd is not None:
            return
        try:
            if self._spill_dir:
                os.makedirs(self._spill_dir, mode=0o700, exist_ok=True)
            fd, self.spill_path = tempfile.mkstemp(prefix=f"execengine-{self._name}-",
                                                   suffix=".txt", dir=self._spill_dir)
        except OSError:  # disk full, no descriptors: keep head and tail, spill nothing
            self._spill_enabled = False
            return
        self._spill_fd = fd

    def _write_spill(self, data: bytes) -> None:
        if self._spill_fd is None:
            return
        room = self._spill_limit - self._spilled
        if room <= 0:
            return
        chunk = data[:room]
        try:
            os.write(self._spill_fd, chunk)
        except OSError as exc:  # disk full: keep what is in memory, stop spilling
            self._spill_error = exc.strerror or type(exc).__name__
            self.close()
            return
        self._spilled += len(chunk)

    def close(self) -> None:
        if self._spill_fd is not None:
            os.close(self._spill_fd)
            self._spill_fd = None

    def result(self, marker: str = "") -> Captured:
        """The kept text (head + marker + tail when truncated)."""
        self.close()
        if self.total <= self.limit:
            data = bytes(self._all)
            return Captured(clean_text(data), self.total, self.total, False)
        if not marker:
            marker = self.marker()
        head = clean_text(bytes(self._head))
        tail = clean_text(bytes(self._tail))
        return Captured(head + marker + tail, self.total, len(self._head) + len(self._tail),
                        True, self.spill_path, self._spilled if self.spill_path else 0)

    def marker(self) -> str:
        """What stands between head and tail: the reference's wording and units, then (for a
        spilled stream) the spill file and exactly what it holds."""
        kept = char_count(bytes(self._head)) + char_count(bytes(self._tail))
        what = "OUTPUT" if self._name == "stdout" else self._name.upper()
        text = f"\n\n{marker_line(self.total_chars - kept, self.total_chars, what)}\n"
        raw = f"the script's raw {self._name}"
        if self.spill_path and self._spilled == self.total:
            text += (f"[full output: {self.spill_path} holds all {self.total:,} bytes of {raw}, "
                     "before ANSI stripping and secret redaction]\n")
        elif self.spill_path:
            why = (f"writing stopped: {self._spill_error}" if self._spill_error
                   else f"spill files are capped at {self._spill_limit:,} bytes")
            text += (f"[spill file: {self.spill_path} holds only the first {self._spilled:,} "
                     f"of {self.total:,} bytes of {raw} (not its end; {why}), before ANSI "
                     "stripping and secret redaction]\n")
        return text + "\n"


# -- the child -------------------------------------------------------------------------

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
