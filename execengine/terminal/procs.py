"""Starting a shell command in its own session, and stopping it with everything it started.

Every command gets a new session (so a new process group) and a unique token in its
environment (``EXECENGINE_TERM_TOKEN``). Stopping escalates: SIGTERM to the group and to
every process carrying the token (which finds children that called ``setsid`` or
double-forked), a grace period, then SIGKILL, and the main process is always reaped.

The shell reports its final working directory on a private pipe: an ``EXIT`` trap writes
``$PWD`` to a high-numbered descriptor, so ``cd`` survives ``exit n`` and the output stays
untouched.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty as ptymod
import signal
import struct
import subprocess
import termios
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

TOKEN_VAR = "EXECENGINE_TERM_TOKEN"
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


def shell_script(command: str, pwd_fd: int) -> str:
    return f"trap 'printf \"%s\" \"$PWD\" >&{pwd_fd}' EXIT\n{command}\n"


def spawn(
    command: str, *, cwd: str, env: Mapping[str, str], pty: bool = False, bash: str = "bash"
) -> Spawned:
    """Start ``bash -c`` running ``command`` (stdin is /dev/null, or the PTY)."""
    token = uuid.uuid4().hex
    child_env = {**env, TOKEN_VAR: token}
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
        try:
            popen = subprocess.Popen(
                [bash, "--noprofile", "--norc", "-c", shell_script(command, pwd_w)],
                cwd=cwd,
                env=child_env,
                stdin=stdin,
                stdout=stdout,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                pass_fds=(pwd_w,),
            )
        except BaseException:
            os.close(out_fd)
            os.close(pwd_r)
            raise
    finally:
        for fd in closers:
            os.close(fd)
    os.set_blocking(out_fd, False)
    return Spawned(popen, out_fd, pwd_r, token, pty)


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


def members(sp: Spawned) -> list[int]:
    """Live (not zombie) processes of this command: its process group, plus any process
    whose environment carries its token (children that left the group)."""
    needle = f"{TOKEN_VAR}={sp.token}".encode()
    me = os.getpid()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
            # fields after the command name (which may hold spaces or parentheses)
            state, _ppid, pgid = stat[stat.rindex(b")") + 2:].split(b" ", 3)[:3]
            if state == b"Z":
                continue
            if int(pgid) == sp.pid:
                found.append(pid)
                continue
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    found.append(pid)
        except (OSError, ValueError):
            continue
    return found


def _signal_all(sp: Spawned, sig: int) -> int:
    """Signal every member; how many there were."""
    pids = members(sp)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
    return len(pids)


def stop(sp: Spawned, *, grace: float) -> None:
    """SIGTERM everything of this command, ``grace`` seconds, then SIGKILL; reap the shell."""
    if _signal_all(sp, signal.SIGTERM):
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            sp.popen.poll()
            if not members(sp):
                break
            time.sleep(0.02)
    kill_rest(sp)


def kill_rest(sp: Spawned) -> None:
    """SIGKILL whatever of this command still runs (no grace) and reap the shell."""
    deadline = time.monotonic() + 5.0
    while _signal_all(sp, signal.SIGKILL) and time.monotonic() < deadline:
        sp.popen.poll()
        time.sleep(0.005)
    with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL cannot be ignored
        sp.popen.wait(timeout=5)
