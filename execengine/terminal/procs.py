"""Starting a shell command in its own session, and stopping it with everything it started.

Every command gets a new session (so a new process group) and a unique token in its
environment (``EXECENGINE_TERM_TOKEN``). Stopping is :class:`execengine.proctree.ProcessSet`'s:
SIGTERM to the group and to every process carrying the token (which finds children that
called ``setsid`` or double-forked), a grace period, then the freeze-and-kill sweep; the
shell is always reaped.

The shell reports its final working directory on a private pipe: an ``EXIT`` trap writes
``$PWD`` to a high-numbered descriptor, so ``cd`` survives ``exit n`` and the output stays
untouched.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty as ptymod
import struct
import subprocess
import termios
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from execengine.proctree import TERM_TOKEN_VAR, EndedBy, Mark, ProcessSet
from execengine.terminal.guard import CommandGuard, liveness_check

#: how long stopping waits for the shell to be reaped after the kill
REAP_SECONDS = 5.0
#: the descriptor the shell reports its working directory on (above bash's own 10..)
PWD_FD_MIN = 200


@dataclass
class Spawned:
    """A started shell: ``out_fd`` carries stdout+stderr (a pipe, or the PTY master)."""

    popen: subprocess.Popen[bytes]
    out_fd: int
    pwd_fd: int
    token: str
    pty: bool
    #: the shell, its group, and everything carrying its token
    processes: ProcessSet
    #: what stops the command should this process be killed (see :mod:`.guard`)
    guard: CommandGuard | None = None

    def release(self) -> None:
        """The command and all it started are gone: its guard can forget it."""
        if self.guard is not None:
            self.guard.withdraw(self.token)

    @property
    def pid(self) -> int:
        return self.popen.pid


    def close_fds(self) -> None:
        for name in ("out_fd", "pwd_fd"):
            fd = getattr(self, name)
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
                setattr(self, name, -1)


def shell_script(command: str, pwd_fd: int, liveness_fd: int | None = None) -> str:
    """The shell's program: with ``liveness_fd``, first the guard's check that the host is
    still there (:func:`execengine.terminal.guard.liveness_check`)."""
    check = liveness_check(liveness_fd) if liveness_fd is not None else ""
    return f"{check}trap 'printf \"%s\" \"$PWD\" >&{pwd_fd}' EXIT\n{command}\n"


def spawn(
    command: str, *, cwd: str, env: Mapping[str, str], pty: bool = False, bash: str = "bash",
    guard: CommandGuard | None = None,
) -> Spawned:
    """Start ``bash -c`` running ``command`` (stdin is /dev/null, or the PTY); ``guard``
    learns its token first (the caller calls :meth:`Spawned.release` when it is gone)."""
    token = uuid.uuid4().hex
    child_env = {**env, TERM_TOKEN_VAR: token}
    if guard is not None:
        guard.register(token)
    alive = guard.liveness_fd if guard is not None else None
    pwd_r, pwd_w0 = os.pipe()
    pwd_w = fcntl.fcntl(pwd_w0, fcntl.F_DUPFD_CLOEXEC, PWD_FD_MIN)
    os.close(pwd_w0)
    os.set_blocking(pwd_r, False)
    closers = [pwd_w]
    try:
        if pty:
            master, slave = ptymod.openpty()
            closers.append(slave)
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 200, 0, 0))
            child_env.setdefault("TERM", "xterm")
            stdin: int = slave
            stdout: int = slave
            out_fd = master
        else:
            out_fd, out_w = os.pipe()
            closers.append(out_w)
            stdin = subprocess.DEVNULL
            stdout = out_w
        before = Mark.now()
        try:
            popen = subprocess.Popen(
                [bash, "--noprofile", "--norc", "-c", shell_script(command, pwd_w, alive)],
                cwd=cwd,
                env=child_env,
                stdin=stdin,
                stdout=stdout,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                pass_fds=(pwd_w,) if alive is None else (pwd_w, alive),
            )
        except BaseException:
            os.close(out_fd)
            os.close(pwd_r)
            if guard is not None:
                guard.withdraw(token)
            raise
    finally:
        for fd in closers:
            os.close(fd)
    os.set_blocking(out_fd, False)
    return Spawned(popen, out_fd, pwd_r, token, pty,
                   ProcessSet.of_popen(popen, TERM_TOKEN_VAR, token, before), guard)


def read_pwd(sp: Spawned) -> str | None:
    """The directory the shell reported, if it did (non-blocking)."""
    if sp.pwd_fd < 0:
        return None
    chunks = []
    while True:
        try:
            data = os.read(sp.pwd_fd, 65536)
        except (BlockingIOError, OSError):
            break
        if not data:
            break
        chunks.append(data)
    text = b"".join(chunks).decode("utf-8", "surrogateescape")
    return text or None


def stop(sp: Spawned, *, grace: float) -> EndedBy:
    """SIGTERM everything of this command, ``grace`` seconds, then the kill; reap the shell.
    Which step ended it."""
    ended = sp.processes.terminate(grace)
    _reap(sp)
    return ended


def kill_rest(sp: Spawned) -> None:
    """Kill whatever of this command still runs (no grace) and reap the shell."""
    sp.processes.kill()
    _reap(sp)


def _reap(sp: Spawned) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL cannot be ignored
        sp.popen.wait(timeout=REAP_SECONDS)
