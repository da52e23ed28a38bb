"""A scripted terminal backend for tests of the layers above (no processes)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from execengine.terminal.backend import CommandResult, LogChunk, ProcessInfo, TerminalBackend

Responder = Callable[[str, str], CommandResult]


def _echo(command: str, cwd: str) -> CommandResult:
    return CommandResult(output=f"ran: {command}\n", exit_code=0, duration=0.0, cwd=cwd)


class FakeBackend(TerminalBackend):
    """Answers ``run`` with ``responder(command, cwd)``; records every call in ``calls``.

    Background processes are records that "run" until killed or :meth:`finish` is called.
    """

    def __init__(self, responder: Responder = _echo) -> None:
        self.responder = responder
        self.calls: list[tuple[str, str]] = []
        self._procs: dict[str, tuple[str, ProcessInfo, str]] = {}
        self._cursor: dict[str, int] = {}
        self.closed = False

    def run(self, command: str, *, cwd: str, env: Mapping[str, str], timeout: float,
            max_output_chars: int, pty: bool = False,
            cancel: threading.Event | None = None) -> CommandResult:
        self.calls.append(("run", command))
        return self.responder(command, cwd)

    def start(self, command: str, *, task: str, cwd: str, env: Mapping[str, str],
              pty: bool = False) -> ProcessInfo:
        self.calls.append(("start", command))
        pid = 10_000 + len(self._procs)
        info = ProcessInfo(f"proc_{len(self._procs) + 1}", command, pid, cwd, time.time(),
                           True, None, pty)
        self._procs[info.id] = (task, info, "")
        return info

    def finish(self, proc_id: str, output: str, exit_code: int = 0) -> None:
        task, info, _ = self._procs[proc_id]
        self._procs[proc_id] = (task, _ended(info, exit_code, len(output)), output)

    def _get(self, proc_id: str, task: str) -> tuple[ProcessInfo, str]:
        owner, info, out = self._procs[proc_id]
        if owner != task:
            raise KeyError(proc_id)
        return info, out

    def processes(self, task: str | None = None) -> list[ProcessInfo]:
        return [i for t, i, _ in self._procs.values() if task is None or t == task]

    def poll(self, proc_id: str, *, task: str) -> ProcessInfo:
        return self._get(proc_id, task)[0]

    def read(self, proc_id: str, *, task: str, since: int | None = None) -> LogChunk:
        _, out = self._get(proc_id, task)
        start = self._cursor.get(proc_id, 0) if since is None else since
        self._cursor[proc_id] = len(out)
        return LogChunk(out[start:], len(out))

    def wait(self, proc_id: str, *, task: str, timeout: float) -> ProcessInfo:
        return self._get(proc_id, task)[0]

    def kill(self, proc_id: str, *, task: str) -> ProcessInfo:
        info, out = self._get(proc_id, task)
        if info.running:
            self._procs[proc_id] = (task, _ended(info, 143, len(out)), out)
        return self._procs[proc_id][1]

    def close_task(self, task: str) -> None:
        for pid, (owner, _, _) in list(self._procs.items()):
            if owner == task:
                self.kill(pid, task=task)

    def close(self) -> None:
        for pid, (owner, _, _) in list(self._procs.items()):
            self.kill(pid, task=owner)
        self.closed = True


def _ended(info: ProcessInfo, code: int, chars: int) -> ProcessInfo:
    return ProcessInfo(info.id, info.command, info.pid, info.cwd, info.started, False, code,
                       info.pty, chars)
