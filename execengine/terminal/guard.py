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

Two moments hide a command's token from ``/proc``, and each is covered:

- Between the host's fork and the shell's ``exec`` the child still has the host's
  environment. So every shell first checks a second pipe whose write end, too, only the
  host holds (:attr:`CommandGuard.liveness_fd`): at EOF the host is gone and the shell
  exits before running anything. A shell that finds the host alive has its token in
  ``/proc`` already, so the guard's sweep, which starts only once the host is gone,
  finds it.
- While a process is inside ``exec`` its ``environ`` reads empty. A round that met such a
  process (one that is not a kernel thread and has not exited) is not the last one: the
  guard looks again a moment later.

The guard runs ``python -I -S`` (about 10 ms, once per backend); a host whose interpreter
cannot start it runs its commands unguarded, with a warning. The same guard, on another
token variable, stops a dead host's MCP stdio servers (:mod:`execengine.mcp.lifeline`).
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import threading

from execengine.proctree import TERM_TOKEN_VAR

log = logging.getLogger(__name__)

#: how long the guard's sweep keeps looking while a process is inside ``exec``
HIDDEN_SECONDS = 2.0

#: the guard's program: register (``+TOKEN``) and withdraw (``-TOKEN``) lines on stdin;
#: its arguments (:func:`guard_argv`): the token's variable, how long to keep looking
#: while a process is inside exec, and the ``/proc`` to look in
GUARD = r"""
import os, signal, sys, time
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
hidden_seconds, proc = float(sys.argv[2]), sys.argv[3]
needles = [b"\0" + var + b"=" + t + b"\0" for t in tokens if t]
me, held = os.getpid(), set()

def read(name, what):
    try:
        with open(proc + "/" + name + "/" + what, "rb") as f:
            return f.read()
    except OSError:
        return None

def hidden(name):
    # inside exec: neither arguments nor environment yet; not a kernel thread, not exited
    fields = (read(name, "stat") or b")").rpartition(b")")[2].split()
    return (len(fields) > 6 and fields[0] not in (b"Z", b"X") and read(name, "cmdline") == b""
            and not int(fields[6]) & 0x200000)

deadline = time.monotonic() + hidden_seconds
for _ in range(1000):
    found, pending = set(), False
    for name in os.listdir(proc) if needles else ():
        if not name.isdigit() or int(name) == me or int(name) in held:
            continue
        env = read(name, "environ")
        if env is None:
            continue
        env = b"\0" + env
        if any(n in env for n in needles):
            found.add(int(name))
        elif env == b"\0" and hidden(name):
            pending = True
    new = found - held
    if not new and (not pending or time.monotonic() > deadline):
        break
    if not new:
        time.sleep(0.002)
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


def guard_argv(proc: str = "/proc", var: str = TERM_TOKEN_VAR) -> list[str]:
    """The guard's command line (``proc``: the ``/proc`` it looks in; a test's fake;
    ``var``: the variable that carries the tokens)."""
    return [sys.executable, "-I", "-S", "-c", GUARD, var, str(HIDDEN_SECONDS), proc]


#: the lowest descriptor number of the liveness pipe's read end (above bash's own 10..)
LIVENESS_FD_MIN = 200
#: the exit status of a shell that found its host gone before it ran anything
HOST_GONE_STATUS = 137


def liveness_check(fd: int) -> str:
    """Shell text that exits when ``fd`` (:attr:`CommandGuard.liveness_fd`) is at EOF,
    then closes it so that nothing the command starts holds it."""
    return f"read -t 0 -u {fd} && exit {HOST_GONE_STATUS}\nexec {fd}<&-\n"


#: how long :meth:`CommandGuard.close` waits for the guard to finish
CLOSE_SECONDS = 5.0


class CommandGuard:
    """One guard process for one backend's commands (started on first use): those whose
    environment holds ``var=<a registered token>``; ``what`` names them in warnings."""

    def __init__(self, var: str = TERM_TOKEN_VAR, what: str = "the terminal commands"
                 ) -> None:
        self.var, self.what = var, what
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._write = -1
        self._alive_r = self._alive_w = -1
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
                log.warning("the guard of %s is gone: those started from now on are not "
                            "stopped should this process be killed", self.what)

    def _start(self) -> None:
        read, write = os.pipe()  # neither end is inherited by the commands
        try:
            self._proc = subprocess.Popen(
                guard_argv(var=self.var), stdin=read,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, close_fds=True)
        except OSError as exc:
            os.close(write)
            self._failed = True
            log.warning("cannot start the guard of %s (%s): they are not stopped should "
                        "this process be killed", self.what, exc)
            return
        finally:
            os.close(read)
        self._write = write
        # the pipe the shells check at start (a high descriptor: above bash's own)
        alive_r, self._alive_w = os.pipe()
        self._alive_r = fcntl.fcntl(alive_r, fcntl.F_DUPFD_CLOEXEC, LIVENESS_FD_MIN)
        os.close(alive_r)

    @property
    def liveness_fd(self) -> int | None:
        """While the guard runs: a descriptor (not inheritable: pass it on explicitly)
        that reads EOF once this process is gone, to be checked by each shell at start
        (see the module's text; :func:`liveness_check` is the check)."""
        return self._alive_r if self._proc is not None and not self._failed else None

    @property
    def pid(self) -> int | None:
        """The guard's pid while it runs (None before the first command)."""
        return self._proc.pid if self._proc is not None else None

    def close(self) -> None:
        """Stop the guard: it stops whatever is still registered. Idempotent."""
        with self._lock:
            self._closed = True
            proc, write, self._write = self._proc, self._write, -1
            alive = (self._alive_r, self._alive_w)
            self._alive_r = self._alive_w = -1
        for fd in (write, *alive):
            if fd >= 0:
                os.close(fd)
        if proc is not None:
            try:
                proc.wait(CLOSE_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
