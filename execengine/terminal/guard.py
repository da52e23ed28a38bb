"""The guard of the local backend's commands: they would outlive a killed host otherwise.

Each command runs in a session of its own as the host's child, so when the host is
SIGKILLed nothing stops it (nor what it started). The backend therefore starts, with its
first command, a small guard process that holds the read end of a pipe whose write end
only the host holds. The backend registers each command's token
(``EXECENGINE_TERM_TOKEN``) before the command starts and withdraws it once the command
and everything it started are gone. EOF on the pipe (the host's exit, a kill included, or
the backend's :meth:`CommandGuard.close`) makes the guard stop every process that carries
a token still registered, found through ``/proc/<pid>/environ`` (the shell, its children,
those that called ``setsid``): each round freezes what it finds with SIGSTOP, until a round
finds nothing new, then kills them all. Then it exits.

The guard runs ``python -I -S`` (about 10 ms, once per backend); a host whose interpreter
cannot start it runs its commands unguarded, with a warning.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading

from execengine.proctree import TERM_TOKEN_VAR

log = logging.getLogger(__name__)

#: the guard's program: register (``+TOKEN``) and withdraw (``-TOKEN``) lines on stdin
GUARD = r"""
import os, signal, sys
var = sys.argv[1].encode()
tokens, buf = set(), b""
while True:
    try:
        data = os.read(0, 65536)
    except InterruptedError:
        continue
    except OSError:
        break
    if not data:
        break
    *lines, buf = (buf + data).split(b"\n")
    for line in lines:
        (tokens.add if line[:1] == b"+" else tokens.discard)(line[1:])
needles = [b"\0" + var + b"=" + t + b"\0" for t in tokens if t]
me, held = os.getpid(), set()
for _ in range(50):
    found = set()
    for name in os.listdir("/proc") if needles else ():
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open("/proc/" + name + "/environ", "rb") as f:
                env = b"\0" + f.read()
        except OSError:
            continue
        if any(n in env for n in needles):
            found.add(int(name))
    new = found - held
    if not new:
        break
    for pid in new:
        try:
            os.kill(pid, signal.SIGSTOP)
        except OSError:
            pass
    held |= new
for pid in held:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
"""

#: how long :meth:`CommandGuard.close` waits for the guard to finish
CLOSE_SECONDS = 5.0


class CommandGuard:
    """One guard process for one backend's commands (started on first use)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._write = -1
        self._failed = False
        self._closed = False

    def register(self, token: str) -> None:
        """Guard the command that will carry ``token`` (call before it starts)."""
        self._send("+" + token)

    def withdraw(self, token: str) -> None:
        """The command of ``token`` and all it started are gone."""
        self._send("-" + token)

    def _send(self, line: str) -> None:
        with self._lock:
            if self._closed or self._failed:
                return
            if self._proc is None:
                self._start()
                if self._proc is None:
                    return
            try:
                os.write(self._write, (line + "\n").encode())  # short: one atomic write
            except OSError:
                self._failed = True
                log.warning("the terminal commands' guard is gone: commands started from "
                            "now on are not stopped should this process be killed")

    def _start(self) -> None:
        read, write = os.pipe()  # neither end is inherited by the commands
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", GUARD, TERM_TOKEN_VAR], stdin=read,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, close_fds=True)
        except OSError as exc:
            os.close(write)
            self._failed = True
            log.warning("cannot start the terminal commands' guard (%s): they are not "
                        "stopped should this process be killed", exc)
            return
        finally:
            os.close(read)
        self._write = write

    @property
    def pid(self) -> int | None:
        """The guard's pid while it runs (None before the first command)."""
        return self._proc.pid if self._proc is not None else None

    def close(self) -> None:
        """Stop the guard: it stops whatever is still registered. Idempotent."""
        with self._lock:
            self._closed = True
            proc, write, self._write = self._proc, self._write, -1
        if write >= 0:
            os.close(write)
        if proc is not None:
            try:
                proc.wait(CLOSE_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
