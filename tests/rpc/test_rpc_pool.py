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


class _Job:
    def __init__(self, gate: threading.Event | None = None, abandoned: bool = False) -> None:
        self.gate, self.abandoned, self.ran = gate, abandoned, threading.Event()

    def __call__(self) -> None:
        self.ran.set()
        if self.gate is not None:
            self.gate.wait(10)


def test_a_reserved_job_counts_against_the_bound():
    """A job its caller runs itself (reserve) holds one of the pool's slots: with both of
    two taken, a submitted job waits and takes the slot the reservation gives back."""
    pool = WorkerPool(2, max_wait=5.0)
    gate = threading.Event()
    token = pool.reserve(_Job())
    assert token is not None and pool.busy == 1
    running = _Job(gate)
    assert pool.submit(running)
    assert running.ran.wait(5)
    assert pool.reserve(_Job()) is None  # both slots taken
    queued = _Job()
    assert pool.submit(queued) and pool.queued == 1
    assert pool.reserve(_Job()) is None  # a queued job is never overtaken
    pool.release(token)
    assert queued.ran.wait(5)  # it got the reservation's slot, on a worker of its own
    gate.set()
    deadline = time.monotonic() + 5
    while pool.busy:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert pool.size <= 2
    pool.close()


def test_abandoned_reservations_count_as_holding_the_pool():
    pool = WorkerPool(2)
    gate = threading.Event()
    hung = _Job(gate, abandoned=True)
    token = pool.reserve(_Job(abandoned=True))
    assert pool.submit(hung) and hung.ran.wait(5)
    assert not pool.submit(_Job())  # refused at once: abandoned jobs hold every slot
    pool.release(token)
    fresh = _Job()
    assert pool.submit(fresh) and fresh.ran.wait(5)
    gate.set()
    pool.close()


def test_reserve_after_close_is_refused():
    pool = WorkerPool(1)
    pool.close()
    assert pool.reserve(_Job()) is None
