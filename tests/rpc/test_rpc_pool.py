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
