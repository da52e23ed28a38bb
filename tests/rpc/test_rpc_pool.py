from __future__ import annotations

import threading
import time

import pytest

from execengine.rpc.pool import WorkerPool


def test_pool_is_bounded_and_runs_in_parallel():
    pool = WorkerPool(3)
    gate = threading.Barrier(3, timeout=5)
    done = threading.Semaphore(0)

    def job():
        gate.wait()  # only passes if three jobs run at once
        done.release()

    for _ in range(6):
        pool.submit(job)
    for _ in range(6):
        assert done.acquire(timeout=5)
    assert pool.size == 3
    pool.close()
    pool.close()


def test_hung_job_does_not_block_close():
    pool = WorkerPool(1)
    never = threading.Event()
    started = threading.Event()
    pool.submit(lambda: (started.set(), never.wait(30)))
    assert started.wait(5)
    t0 = time.monotonic()
    pool.close(timeout=0.2)
    assert time.monotonic() - t0 < 1.0  # bounded by its timeout, not by the hung job
    assert pool.busy == 1  # the job still holds its (daemon) worker
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(lambda: None)
    never.set()
    deadline = time.monotonic() + 5
    while pool.busy:
        assert time.monotonic() < deadline
        time.sleep(0.005)


def _failing_starts(monkeypatch, prefix: str, times: int) -> list[str]:
    """Thread.start raises (as when the process is at its thread limit) for the next
    ``times`` threads whose name starts with ``prefix``; the names refused are listed."""
    refused: list[str] = []
    start = threading.Thread.start

    def flaky(self):
        if self.name.startswith(prefix) and len(refused) < times:
            refused.append(self.name)
            raise RuntimeError("can't start new thread")
        return start(self)

    monkeypatch.setattr(threading.Thread, "start", flaky)
    return refused


def test_a_worker_that_cannot_start_leaves_the_job_waiting_not_lost(monkeypatch):
    # the host at its thread limit: the job waits for a worker that exists (or, with none,
    # is handed back by expired() after max_wait); a thread that never ran is no worker
    pool = WorkerPool(4, max_wait=0.2)
    release = threading.Event()
    ran = threading.Semaphore(0)
    pool.submit(lambda: (release.wait(10), ran.release()))
    assert pool.size == 1
    refused = _failing_starts(monkeypatch, "execengine-tool", 1)
    assert pool.submit(ran.release)
    assert refused and pool.size == 1 and pool.queued == 1
    release.set()
    assert ran.acquire(timeout=5) and ran.acquire(timeout=5)  # the worker ran it after
    assert pool.queued == 0
    pool.close()

    empty = WorkerPool(2, max_wait=0.2)
    _failing_starts(monkeypatch, "execengine-tool", 1)
    assert empty.submit(ran.release)
    assert empty.size == 0 and empty.queued == 1
    time.sleep(0.25)
    assert len(empty.expired()) == 1  # the caller answers it: it is not lost
    empty.close()
