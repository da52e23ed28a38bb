"""The table of a backend's background processes, and the lookups both backends share."""

from __future__ import annotations

import threading
from typing import Generic, Protocol, TypeVar

from execengine.terminal.backend import LogChunk, ProcessInfo
from execengine.terminal.output import Ring


class BackgroundProcess(Protocol):
    task: str
    ring: Ring
    cursor: int
    done: threading.Event

    def info(self) -> ProcessInfo: ...


P = TypeVar("P", bound=BackgroundProcess)


class BackgroundTable(Generic[P]):
    """``proc_id -> process`` under a lock; a process is visible only to its own task."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: dict[str, P] = {}

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
