"""Reading a command's output until it ends, without ever blocking on a grandchild.

The loop waits on the output descriptor and on a pidfd of the shell (Linux >= 5.3; a short
poll interval otherwise), so a fast command returns as soon as it exits. Once the shell has
ended, whatever else of the command still runs is killed and the pipe is drained: a
grandchild that kept the pipe open cannot hold the result back.
"""

from __future__ import annotations

import errno
import os
import selectors
import threading
import time
from collections.abc import Callable

from execengine.terminal.output import Utf8Stream
from execengine.terminal.procs import Spawned

CHUNK = 65536
#: how long to wait for the last bytes once everything that could write is gone
DRAIN_SECONDS = 0.5


class _Reader:
    def __init__(self, sp: Spawned, sink: Callable[[str], None]) -> None:
        self.sp = sp
        self._sink = sink
        self._dec = Utf8Stream()
        self.eof = False
        self._cr = False

    def _emit(self, text: str) -> None:
        if self.sp.pty and text:
            # a terminal turns "\n" into "\r\n"; give callers plain newlines
            if self._cr:
                text = "\r" + text
            self._cr = text.endswith("\r")
            if self._cr:
                text = text[:-1]
            text = text.replace("\r\n", "\n")
        if text:
            self._sink(text)

    def read_once(self) -> bool:
        """Read what is there; False when nothing was (or at end of file)."""
        if self.eof or self.sp.out_fd < 0:
            return False
        try:
            data = os.read(self.sp.out_fd, CHUNK)
        except BlockingIOError:
            return False
        except OSError as exc:  # EIO: every end of the PTY's slave side is closed
            if exc.errno != errno.EIO:
                raise
            data = b""
        if not data:
            self.eof = True
            return False
        self._emit(self._dec.feed(data))
        return True

    def finish(self) -> None:
        tail = self._dec.flush()
        if self._cr:
            tail = "\r" + tail
            self._cr = False
        if tail:
            self._sink(tail)


def _pidfd(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:
        return None


def pump(
    sp: Spawned,
    sink: Callable[[str], None],
    *,
    deadline: float | None = None,
    cancel: threading.Event | None = None,
) -> tuple[str, _Reader]:
    """Feed decoded output to ``sink`` until the shell exits (``"exited"``), ``deadline``
    passes (``"timeout"``) or ``cancel`` is set (``"cancelled"``)."""
    reader = _Reader(sp, sink)
    sel = selectors.DefaultSelector()
    pidfd = _pidfd(sp.pid)
    try:
        sel.register(sp.out_fd, selectors.EVENT_READ, "out")
        if pidfd is not None:
            sel.register(pidfd, selectors.EVENT_READ, "pid")
        step = 0.25 if pidfd is not None else 0.02
        while True:
            if sp.popen.poll() is not None:
                return "exited", reader
            if cancel is not None and cancel.is_set():
                return "cancelled", reader
            wait = step
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return "timeout", reader
                wait = min(wait, left)
            for key, _ in sel.select(wait):
                if key.data == "out":
                    while reader.read_once():
                        pass
                    if reader.eof:
                        sel.unregister(sp.out_fd)
    finally:
        sel.close()
        if pidfd is not None:
            os.close(pidfd)


def drain(reader: _Reader) -> None:
    """Read the rest after every writer is gone (bounded), then flush the decoder."""
    end = time.monotonic() + DRAIN_SECONDS
    while not reader.eof and time.monotonic() < end:
        if not reader.read_once() and not reader.eof:
            time.sleep(0.005)
    reader.finish()
