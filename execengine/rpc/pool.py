"""A bounded pool of daemon worker threads for tool calls, with a bounded wait.

Unlike :class:`concurrent.futures.ThreadPoolExecutor`, its threads are daemons: a tool call
that hangs forever never blocks interpreter exit, and closing the pool never waits for it.
Threads start on demand, up to ``max_workers``.

When every worker is busy a job waits in a FIFO backlog (each execution has at most its
``max_parallel_calls`` there, so the backlog is shared fairly and bounded), and a worker
that finishes takes the oldest. A job that waits longer than ``max_wait`` seconds is handed
back by :meth:`WorkerPool.expired` (the caller answers it with an error). Only when
*abandoned* jobs (calls of executions that already ended, see :class:`PoolJob`) hold every
worker is a new job refused at once: nothing would ever free a worker for it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from typing import Protocol

log = logging.getLogger(__name__)


class PoolJob(Protocol):
    def __call__(self) -> None: ...

    @property
    def abandoned(self) -> bool:
        """Nobody waits for this job's outcome any more."""
        ...


class WorkerPool:
    def __init__(self, max_workers: int, *, name: str = "execengine-tool",
                 max_wait: float = 30.0) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be >= 1")
        self.max_workers = max_workers
        self.max_wait = max_wait
        self._name = name
        self._jobs: queue.SimpleQueue[PoolJob | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._busy = 0  # jobs handed to a worker and not finished
        self._running: dict[int, PoolJob] = {}  # thread ident -> its job
        #: the jobs waiting for a worker, with their deadlines (read it, do not change it)
        self.backlog: deque[tuple[float, PoolJob]] = deque()
        self._closed = False

    def submit(self, job: PoolJob) -> bool:
        """Run ``job`` on a worker, or queue it while all are busy. False (nothing queued)
        when abandoned jobs hold every worker. Raises RuntimeError once closed."""
        with self._lock:
            if self._closed:
                raise RuntimeError("worker pool is closed")
            if self._busy < len(self._threads):
                self._busy += 1
                self._jobs.put(job)
                return True
            if len(self._threads) < self.max_workers:
                try:
                    self._grow()
                except RuntimeError:  # no thread left in this process (its limit): the
                    # job waits for a worker like one past max_workers
                    log.warning("cannot start a tool worker thread (%d running)",
                                len(self._threads))
                else:
                    self._busy += 1
                    self._jobs.put(job)
                    return True
            if self._held_by_abandoned():
                return False
            self.backlog.append((time.monotonic() + self.max_wait, job))
            return True

    def _held_by_abandoned(self) -> bool:
        # under self._lock; every worker is busy
        jobs = list(self._running.values())
        return len(jobs) >= self.max_workers and all(_abandoned(j) for j in jobs)

    def expired(self, now: float | None = None) -> list[PoolJob]:
        """Take the queued jobs that waited longer than ``max_wait`` (oldest first), and
        every queued job once abandoned jobs hold the whole pool."""
        now = time.monotonic() if now is None else now
        out: list[PoolJob] = []
        with self._lock:
            hopeless = bool(self.backlog) and self._held_by_abandoned()
            while self.backlog and (hopeless or self.backlog[0][0] <= now):
                out.append(self.backlog.popleft()[1])
            # abandoned jobs that never started are dropped as well
            if self.backlog and any(_abandoned(j) for _, j in self.backlog):
                keep = deque((d, j) for d, j in self.backlog if not _abandoned(j))
                out.extend(j for _, j in self.backlog if _abandoned(j))
                self.backlog = keep
        return out

    def _grow(self) -> None:
        # under self._lock
        t = threading.Thread(target=self._work, daemon=True,
                             name=f"{self._name}-{len(self._threads)}")
        t.start()  # counted once it runs: a thread that failed to start is no worker
        self._threads.append(t)

    def _work(self) -> None:
        me = threading.get_ident()
        job: PoolJob | None = self._jobs.get()
        while job is not None:
            with self._lock:
                self._running[me] = job
            try:
                job()
            except Exception:  # a job reports its own errors; this is a last resort
                log.exception("tool worker job failed")
            with self._lock:
                del self._running[me]
                if self.backlog and not self._closed:
                    job = self.backlog.popleft()[1]
                    continue
                self._busy -= 1
            job = self._jobs.get()

    @property
    def busy(self) -> int:
        """Jobs running or queued."""
        with self._lock:
            return self._busy + len(self.backlog)

    @property
    def queued(self) -> int:
        with self._lock:
            return len(self.backlog)

    @property
    def size(self) -> int:
        with self._lock:
            return len(self._threads)

    def close(self, timeout: float = 1.0) -> list[PoolJob]:
        """Stop idle workers; busy ones finish their job and exit (they are daemons).
        Returns the queued jobs that will never run."""
        with self._lock:
            if self._closed:
                return []
            self._closed = True
            threads = list(self._threads)
            left = [j for _, j in self.backlog]
            self.backlog.clear()
        for _ in threads:
            self._jobs.put(None)
        for t in threads:
            t.join(timeout / max(1, len(threads)))
        return left


def _abandoned(job: PoolJob) -> bool:
    try:
        return bool(job.abandoned)
    except Exception:  # pragma: no cover - a job without the attribute
        return False


def busy_message(workers: int) -> str:
    return (f"Tool call refused: all {workers} host worker threads for tool calls are held "
            "by calls that never returned (see code_execution.max_tool_threads). "
            "Try again later.")


def waited_message(seconds: float) -> str:
    return (f"Tool call refused: no host worker thread became free within {seconds:g} s "
            "(see code_execution.max_tool_threads). Try again later.")
