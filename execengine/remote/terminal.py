"""The ``ssh`` terminal backend: commands run on the remote, over the shared connection.

Every command is one channel of the multiplexed connection running the remote helper
:mod:`sandbox.rshell` (``bash -c`` in a new session, under ``env -i`` with the allow-listed
environment). Its output streams back as it comes; a timeout writes ``K`` to the helper
(SIGTERM to the command's session and every process carrying its token, grace, SIGKILL);
closing the channel, or losing the connection, kills all of it on the remote. Background
processes are channels kept open, pumped into a ring buffer by a thread as locally.

Working directories are remote paths: the helper checks them and reports the shell's last
one, so ``cd`` sticks as it does locally.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from execengine._runtime import entry_program
from execengine.errors import TerminalError
from execengine.proctree import ProcessSet
from execengine.remote.launcher import encode_header, remote_env
from execengine.terminal.backend import (
    INTERRUPTED_EXIT_CODE,
    INTERRUPTED_TEXT,
    TIMEOUT_EXIT_CODE,
    CommandResult,
    ProcessInfo,
    TerminalBackend,
)
from execengine.terminal.background import BackgroundTable
from execengine.terminal.output import HeadTail, Ring, Utf8Stream

if TYPE_CHECKING:
    from execengine.host.ssh import SshHost

#: the remote shell server's ``python -c`` program (``sandbox/rshell.py``'s ``ENTRY``)
ENTRY = entry_program("rshell")
#: exit code reported when the connection failed under a command (as ssh reports it)
CONNECTION_LOST = 255


class _Channel:
    """One remote command: the local ssh process, its status lines, its output."""

    def __init__(self, host: SshHost, command: str, cwd: str, env: Mapping[str, str],
                 pty: bool, grace: float) -> None:
        self.grace = grace
        argv = host.connection.command(host.python_command(ENTRY))
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True,
                                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        except OSError as exc:
            raise TerminalError(f"cannot start ssh: {exc}") from exc
        header = encode_header({"command": command, "cwd": cwd, "pty": "1" if pty else None,
                                "grace": str(grace)}, remote_env(env, None))
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.write(header)
            self.proc.stdin.flush()
        self.pid = -1
        self.started = threading.Event()
        self.status: dict[str, object] = {}
        self.said: list[str] = []
        self._err = threading.Thread(target=self._read_status, daemon=True,
                                     name="ssh-terminal-status")
        self._err.start()
        self._dec = Utf8Stream()
        self.eof = False

    def _read_status(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").strip()
            try:
                msg = json.loads(line) if line.startswith("{") else None
            except ValueError:
                msg = None
            if isinstance(msg, dict) and "pid" in msg:
                self.pid = int(msg["pid"])
                self.started.set()
            elif isinstance(msg, dict):
                self.status = msg
            elif line:
                self.said.append(line)
        self.started.set()

    def pump(self, sink: Callable[[str], None], deadline: float | None = None,
             cancel: threading.Event | None = None) -> bool:
        """Feed output to ``sink`` until the channel ends (True) or ``deadline`` passes or
        ``cancel`` is set (False)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while not self.eof:
                wait = 0.25
                if deadline is not None:
                    wait = min(wait, deadline - time.monotonic())
                    if wait <= 0:
                        return False
                if cancel is not None and cancel.is_set():
                    return False
                if sel.select(wait):
                    data = os.read(fd, 65536)
                    if not data:
                        self.eof = True
                    else:
                        text = self._dec.feed(data)
                        if text:
                            sink(text)
        tail = self._dec.flush()
        if tail:
            sink(tail)
        return True

    def terminate(self) -> None:
        stdin = self.proc.stdin
        if stdin is not None and not stdin.closed:
            with contextlib.suppress(OSError, ValueError):
                stdin.write(b"K")
                stdin.flush()

    def finish(self, wait: float = 10.0) -> None:
        """Close the control channel (the remote kills what is left), reap ssh."""
        with contextlib.suppress(OSError, ValueError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(wait)
        except subprocess.TimeoutExpired:
            ProcessSet.of_popen(self.proc).kill()  # ssh and its group
            self.proc.wait()
        self._err.join(5)
        for f in (self.proc.stdout, self.proc.stderr):
            if f is not None:
                f.close()

    def exit_code(self) -> int:
        code = self.status.get("exit")
        return code if isinstance(code, int) else CONNECTION_LOST

    def problem(self) -> str | None:
        """Why the command did not run, or the connection ended under it (else None)."""
        if "error" in self.status:
            return str(self.status["error"])
        if "exit" not in self.status:
            said = "; ".join(self.said[-3:]) or f"ssh exited {self.proc.returncode}"
            return f"the connection to the remote ended: {said}"
        return None


class _Background:
    def __init__(self, proc_id: str, task: str, command: str, cwd: str, ch: _Channel,
                 buffer_chars: int, pty: bool) -> None:
        self.id, self.task, self.command, self.cwd, self.ch = proc_id, task, command, cwd, ch
        self.pty = pty
        self.started = time.time()
        self.ring = Ring(buffer_chars)
        self.cursor = 0
        self.done = threading.Event()
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"ssh-terminal-{proc_id}")
        self._thread.start()

    def _run(self) -> None:
        try:
            self.ch.pump(self.ring.write, cancel=self._cancel)
        finally:
            self.ch.finish()
            self.done.set()

    def info(self) -> ProcessInfo:
        done = self.done.is_set()
        return ProcessInfo(id=self.id, command=self.command, pid=self.ch.pid, cwd=self.cwd,
                           started=self.started, running=not done,
                           exit_code=self.ch.exit_code() if done else None, pty=self.pty,
                           output_chars=self.ring.end)

    def stop(self) -> None:
        if not self.done.is_set():
            self.ch.terminate()
            if not self.done.wait(self.ch.grace + 5):
                self._cancel.set()
        self._thread.join(15)


class SshBackend(BackgroundTable[_Background], TerminalBackend):
    """Runs commands on the remote of ``host``; does not own the connection."""

    def __init__(self, host: SshHost, *, kill_grace: float = 2.0,
                 buffer_chars: int = 200_000, max_background: int = 16) -> None:
        self.host = host
        self.kill_grace = kill_grace
        self.buffer_chars = buffer_chars
        BackgroundTable.__init__(self, max_background)

    # -- paths are remote ---------------------------------------------------------------

    def default_cwd(self) -> str | None:
        return self.host.default_cwd()

    def is_dir(self, path: str) -> bool:
        return True  # checked on the remote when the command starts

    def expanduser(self, path: str) -> str:
        return self.host.expanduser(path)

    # -- foreground -----------------------------------------------------------------------

    def _open(self, command: str, cwd: str, env: Mapping[str, str], pty: bool) -> _Channel:
        try:
            return _Channel(self.host, command, cwd, env, pty, self.kill_grace)
        except TerminalError:
            raise
        except Exception as exc:  # RemoteError: cannot connect or install
            raise TerminalError(str(exc)) from exc

    def run(self, command: str, *, cwd: str, env: Mapping[str, str], timeout: float,
            max_output_chars: int, pty: bool = False,
            cancel: threading.Event | None = None) -> CommandResult:
        out = HeadTail(max_output_chars)
        t0 = time.monotonic()
        ch = self._open(command, cwd, env, pty)
        try:
            ended = ch.pump(out.feed, deadline=t0 + timeout, cancel=cancel)
            cancelled = not ended and cancel is not None and cancel.is_set()
            if not ended:
                ch.terminate()
                ch.pump(out.feed, deadline=time.monotonic() + self.kill_grace + 5)
        finally:
            ch.finish()
        duration = time.monotonic() - t0
        if "error" in ch.status:  # nothing ran (a working directory that does not exist)
            raise TerminalError(str(ch.status["error"]))
        text = out.text()
        if cancelled:
            text += f"\n[{INTERRUPTED_TEXT}]"
        elif not ended:
            text += f"\n[Command timed out after {timeout:g}s and was killed.]"
        elif "exit" not in ch.status:
            text += f"\n[{ch.problem()}]"
        cwd_after = ch.status.get("cwd")
        return CommandResult(
            output=text,
            exit_code=(INTERRUPTED_EXIT_CODE if cancelled else TIMEOUT_EXIT_CODE if not ended
                       else ch.exit_code()),
            duration=duration,
            cwd=cwd_after if ended and isinstance(cwd_after, str) else None,
            timed_out=not ended and not cancelled,
            truncated=out.truncated,
            total_chars=out.total,
        )

    # -- background -----------------------------------------------------------------------

    def start(self, command: str, *, task: str, cwd: str, env: Mapping[str, str],
              pty: bool = False) -> ProcessInfo:
        with self._admitted() as proc_id:  # the channel opens outside the lock
            ch = self._open(command, cwd, env, pty)
            ch.started.wait(self.host.connection.target.connect_timeout + 10)
            if ch.pid < 0:
                ch.finish()
                raise TerminalError(ch.problem() or "the remote command did not start")
            bg = _Background(proc_id, task, command, cwd, ch, self.buffer_chars, pty)
            if not self._add(bg):
                self._stop_all([bg])
                raise TerminalError("the terminal backend is closed")
        return bg.info()

    def kill(self, proc_id: str, *, task: str) -> ProcessInfo:
        bg = self._get(proc_id, task)
        bg.stop()
        return bg.info()

    def close_task(self, task: str) -> None:
        self._stop_all(self._take(task))

    def close(self) -> None:
        self._stop_all(self._take(None))

    @staticmethod
    def _stop_all(bgs: list[_Background]) -> None:
        for b in bgs:  # ask them all first, so the grace periods overlap
            if not b.done.is_set():
                b.ch.terminate()
        for b in bgs:
            b.stop()
