"""A session's kernel on a remote: its three streams over one SSH channel.

A local kernel has four pipes to the host (commands in; stdout, stderr and replies out). An
SSH channel has three streams, so the remote helper (``sandbox/remote.py``'s
``relay_kernel``) puts the kernel's stderr and its replies on the channel's stderr in frames,
and this side takes them apart again into two local pipes: the kernel's stderr (the child's
``stderr``) and the reply pipe the engine handed the launcher. The engine's command pipe is
copied onto the channel's stdin; its end (the engine closing the kernel) closes the channel's
stdin, and the remote then ends everything of the kernel. So :class:`execengine.engine.kernel.
KernelProcess` drives a remote kernel exactly as it drives a local one.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from typing import IO

#: the frame header's magic, as ``sandbox/remote.py``'s ``FRAME``
FRAME = b"\x00EE"
HEADER = len(FRAME) + 1 + 8
#: the largest frame the helper writes (it reads at most 64 KiB at a time): a larger
#: length is not a frame, and is never waited for
MAX_FRAME = 1 << 16
#: the kernel's fds are named in its environment, as for a local kernel
KERNEL_FDS_VAR = "EXECENGINE_KERNEL_FDS"


def kernel_fds(env: dict[str, str]) -> tuple[int, int] | None:
    """The engine's (command read end, reply write end) when ``env`` is a kernel's."""
    value = env.get(KERNEL_FDS_VAR)
    if not value:
        return None
    cmd, reply = (int(v) for v in value.split(","))
    return cmd, reply


class Demux:
    """Takes the channel's stderr apart: frames of ``e`` (the kernel's stderr) and ``r``
    (its replies); bytes outside a frame (what ``ssh`` itself says) are stderr too."""

    def __init__(self, err_w: int, reply_w: int) -> None:
        self.out = {b"e": err_w, b"r": reply_w}
        self.buf = b""

    def feed(self, data: bytes) -> None:
        self.buf += data
        while self.buf:
            at = self.buf.find(FRAME)
            if at != 0:
                # raw bytes before the next frame (keep a possible partial magic back)
                cut = at if at > 0 else max(0, len(self.buf) - (len(FRAME) - 1))
                if cut == 0:
                    return
                self._write(b"e", self.buf[:cut])
                self.buf = self.buf[cut:]
                continue
            if len(self.buf) < HEADER:
                return
            kind = self.buf[len(FRAME):len(FRAME) + 1]
            try:
                size = int(self.buf[len(FRAME) + 1:HEADER], 16)
            except ValueError:
                size = -1
            if kind not in self.out or not 0 <= size <= MAX_FRAME:  # ssh's own words
                self._write(b"e", self.buf[:1])
                self.buf = self.buf[1:]
                continue
            if len(self.buf) < HEADER + size:
                return
            self._write(kind, self.buf[HEADER:HEADER + size])
            self.buf = self.buf[HEADER + size:]

    def end(self) -> None:
        if self.buf:
            self._write(b"e", self.buf)
            self.buf = b""

    def _write(self, kind: bytes, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.out[kind], view):]
            except OSError:
                return  # the engine stopped reading: what is left is dropped


def relay(proc: subprocess.Popen[bytes], cmd_fd: int, reply_fd: int) -> IO[bytes]:
    """Start the two threads of a remote kernel's channel; the kernel's stderr (read end).
    ``cmd_fd``/``reply_fd`` are the engine's ends, duplicated here (the engine closes its
    copies once the launch returns); the threads close theirs when their stream ends."""
    assert proc.stdin is not None and proc.stderr is not None
    cmd = os.dup(cmd_fd)
    reply = os.dup(reply_fd)
    err_r, err_w = os.pipe()
    stdin, stderr = proc.stdin, proc.stderr

    def commands() -> None:
        try:
            while True:
                try:
                    data = os.read(cmd, 1 << 16)
                except OSError:
                    data = b""
                if not data:
                    break
                try:
                    stdin.write(data)
                    stdin.flush()
                except (OSError, ValueError):
                    break
        finally:
            os.close(cmd)
            with contextlib.suppress(OSError, ValueError):
                stdin.close()  # EOF: the remote ends everything of the kernel

    def errors() -> None:
        demux = Demux(err_w, reply)
        try:
            fd = stderr.fileno()
            while True:
                try:
                    data = os.read(fd, 1 << 16)
                except OSError:
                    data = b""
                if not data:
                    break
                demux.feed(data)
            demux.end()
        finally:
            for fd_ in (err_w, reply):
                with contextlib.suppress(OSError):
                    os.close(fd_)
            with contextlib.suppress(OSError, ValueError):
                stderr.close()

    for target, name in ((commands, "ssh-kernel-commands"), (errors, "ssh-kernel-stderr")):
        threading.Thread(target=target, name=name, daemon=True).start()
    return open(err_r, "rb", buffering=0)
