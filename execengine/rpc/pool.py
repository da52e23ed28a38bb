"""A bounded pool of daemon worker threads for tool calls.

Unlike :class:`concurrent.futures.ThreadPoolExecutor`, its threads are daemons: a tool call
that hangs forever never blocks interpreter exit, and closing the pool never waits for it.
Threads start on demand, up to ``max_workers``. :meth:`WorkerPool.try_submit` never queues:
when every worker is busy (say, with hung calls nobody waits for any more) it says so and
the caller answers with an error instead of waiting behind them.
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
        self._busy = 0  # jobs submitted and not yet finished
        self._closed = False

    def submit(self, job: Job) -> None:
        """Run ``job`` on a worker; it waits in the queue while all are busy."""
        with self._lock:
            if self._closed:
                raise RuntimeError("worker pool is closed")
            if self._busy >= len(self._threads) and len(self._threads) < self.max_workers:
                self._grow()
            self._busy += 1
            self._jobs.put(job)

    def try_submit(self, job: Job) -> bool:
        """Run ``job`` now on an idle (or new) worker; False, and nothing queued, when all
        ``max_workers`` are busy."""
        with self._lock:
            if self._closed:
                raise RuntimeError("worker pool is closed")
            if self._busy >= len(self._threads):
                if len(self._threads) >= self.max_workers:
                    return False
                self._grow()
            self._busy += 1
            self._jobs.put(job)
            return True

    def _grow(self) -> None:
        # under self._lock
        t = threading.Thread(target=self._work, daemon=True,
                             name=f"{self._name}-{len(self._threads)}")
        self._threads.append(t)
        t.start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job()
            except Exception:  # a job reports its own errors; this is a last resort
                log.exception("tool worker job failed")
            finally:
                with self._lock:
                    self._busy -= 1

    @property
    def busy(self) -> int:
        """Jobs running or waiting for a worker."""
        with self._lock:
            return self._busy

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
