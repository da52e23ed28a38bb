from __future__ import annotations

import threading

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
    pool.submit(lambda: never.wait(30))
    pool.close(timeout=0.2)
    never.set()
