"""A bounded pool of daemon worker threads for tool calls.

Unlike :class:`concurrent.futures.ThreadPoolExecutor`, its threads are daemons: a tool call
that hangs forever never blocks interpreter exit, and closing the pool never waits for it.
Threads start on demand, up to ``max_workers``.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

Job = Callable[[], None]


class WorkerPool:
    def __init__(self, max_workers: int, *, name: str = "execengine-tool") -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be >= 1")
        self.max_workers = max_workers
        self._name = name
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0  # workers blocked waiting for a job
        self._pending = 0  # jobs queued and not yet taken
        self._closed = False

    def submit(self, job: Job) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("worker pool is closed")
            self._pending += 1
            if self._pending > self._idle and len(self._threads) < self.max_workers:
                t = threading.Thread(target=self._work, daemon=True,
                                     name=f"{self._name}-{len(self._threads)}")
                self._threads.append(t)
                t.start()
            self._jobs.put(job)

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            job = self._jobs.get()
            with self._lock:
                self._idle -= 1
                if job is not None:
                    self._pending -= 1
            if job is None:
                return
            try:
                job()
            except Exception:  # a job reports its own errors; this is a last resort
                log.exception("tool worker job failed")

    @property
    def size(self) -> int:
        with self._lock:
            return len(self._threads)

    def close(self, timeout: float = 1.0) -> None:
        """Stop idle workers; busy ones finish their job and exit (they are daemons)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._jobs.put(None)
        for t in threads:
            t.join(timeout / max(1, len(threads)))
