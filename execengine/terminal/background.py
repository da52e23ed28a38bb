"""The table of a backend's background processes: what both backends share (admitting a
new one within the limit, the lookups, taking a task's or every process to stop them)."""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar

from execengine.errors import TerminalError
from execengine.terminal.backend import LogChunk, ProcessInfo
from execengine.terminal.output import Ring


class BackgroundProcess(Protocol):
    id: str
    task: str
    ring: Ring
    cursor: int
    done: threading.Event

    def info(self) -> ProcessInfo: ...


P = TypeVar("P", bound=BackgroundProcess)


class BackgroundTable(Generic[P]):
    """``proc_id -> process`` under a lock; a process is visible only to its own task.
    ``max_background``: the processes allowed to run at once."""

    def __init__(self, max_background: int) -> None:
        self.max_background = max_background
        self._lock = threading.Lock()
        self._procs: dict[str, P] = {}
        self._ids = itertools.count(1)
        self._closed = False
        #: processes admitted and starting outside the lock, not in the table yet
        self._starting = 0

    def _new_id(self) -> str:
        """The id of a process about to start (call with the lock held); raises
        :class:`TerminalError` when the backend is closed or runs its limit already."""
        if self._closed:
            raise TerminalError("the terminal backend is closed")
        running = self._starting + sum(1 for p in self._procs.values() if not p.done.is_set())
        if running >= self.max_background:
            raise TerminalError(
                f"{running} background processes are running (the limit is "
                f"{self.max_background}); kill one first")
        return f"proc_{next(self._ids)}"

    @contextlib.contextmanager
    def _admitted(self) -> Iterator[str]:
        """The id of a process that starts outside the lock (a remote one: a round trip),
        its place within the limit held until the block ends; the block puts it in the
        table with :meth:`_add`."""
        with self._lock:
            proc_id = self._new_id()
            self._starting += 1
        try:
            yield proc_id
        finally:
            with self._lock:
                self._starting -= 1

    def _add(self, proc: P) -> bool:
        """Put a started process in the table; False when the backend was closed while it
        started (the caller stops it)."""
        with self._lock:
            if self._closed:
                return False
            self._procs[proc.id] = proc
            return True

    def _take(self, task: str | None) -> list[P]:
        """Remove ``task``'s processes from the table and return them, to be stopped;
        every process for None (the backend closes: it admits no more)."""
        with self._lock:
            if task is None:
                self._closed = True
                taken, self._procs = list(self._procs.values()), {}
            else:
                taken = [p for p in self._procs.values() if p.task == task]
                for p in taken:
                    del self._procs[p.id]
        return taken

    def _get(self, proc_id: str, task: str) -> P:
        with self._lock:
            bg = self._procs.get(proc_id)
        if bg is None or bg.task != task:
            raise KeyError(proc_id)
        return bg

    def processes(self, task: str | None = None) -> list[ProcessInfo]:
        with self._lock:
            found = [p for p in self._procs.values() if task is None or p.task == task]
        return [p.info() for p in found]

    def poll(self, proc_id: str, *, task: str) -> ProcessInfo:
        return self._get(proc_id, task).info()

    def read(self, proc_id: str, *, task: str, since: int | None = None) -> LogChunk:
        bg = self._get(proc_id, task)
        text, end, dropped = bg.ring.read(bg.cursor if since is None else since)
        bg.cursor = end
        return LogChunk(text, end, dropped)

    def wait(self, proc_id: str, *, task: str, timeout: float) -> ProcessInfo:
        bg = self._get(proc_id, task)
        bg.done.wait(max(0.0, timeout))
        return bg.info()
