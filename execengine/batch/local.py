"""The local executor: a bounded pool of executions on this machine, one shared engine.

Tasks of one session run one at a time, in file order (:mod:`execengine.batch.sessions`).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from execengine._resources import usable_cpus
from execengine.batch.executor import Executor, run_task
from execengine.batch.outcome import TaskOutcome
from execengine.batch.sessions import SessionOrder
from execengine.batch.task import Task
from execengine.config import Config
from execengine.engine import Engine
from execengine.registry import ToolRegistry

#: how often a waiting run looks at its stop event
POLL_SECONDS = 0.2


def default_concurrency() -> int:
    """What this machine sustains: one execution per CPU this process may use."""
    return usable_cpus()


class LocalExecutor(Executor):
    """Runs tasks on threads of this process, each an ``Engine.execute`` of one engine.

    Pass an ``engine`` to share one you hold (it stays yours), or a ``config`` and optional
    ``registry`` to have the executor build and close its own.
    """

    def __init__(self, engine: Engine | None = None, *, config: Config | None = None,
                 registry: ToolRegistry | None = None, concurrency: int | None = None) -> None:
        if concurrency is not None and concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.concurrency = concurrency or default_concurrency()
        self._own_engine = engine is None
        self.engine = engine if engine is not None else Engine(config=config, registry=registry)
        self._host = socket.gethostname()

    def close(self) -> None:
        if self._own_engine:
            self.engine.close()

    def run(self, tasks: Iterable[Task], *, stop: threading.Event | None = None
            ) -> Iterator[TaskOutcome]:
        stop = stop or threading.Event()
        interrupt = threading.Event()  # set once: every running execution stops
        order = SessionOrder(tasks, hold=4 * self.concurrency)
        pending: set[Future[TaskOutcome]] = set()
        pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="execengine-batch")
        try:
            while True:
                while not stop.is_set() and len(pending) < self.concurrency:
                    task = order.next()
                    if task is None:
                        break
                    pending.add(pool.submit(self._one, task, time.time(), interrupt))
                if not pending:  # drained (a held task always has its session's one running)
                    return
                done, pending = wait(pending, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
                if stop.is_set():
                    interrupt.set()
                for future in done:
                    outcome = future.result()
                    if outcome.task is not None:
                        order.finished(outcome.task)
                    if interrupt.is_set() and outcome.status == "interrupted":
                        continue  # stopped by us, not finished: a resumed run starts it again
                    yield outcome
        finally:
            interrupt.set()
            pool.shutdown(wait=True, cancel_futures=True)

    def _one(self, task: Task, submitted: float, interrupt: threading.Event) -> TaskOutcome:
        worker = f"local:{self._host}:{threading.current_thread().name}"
        return run_task(self.engine, task, worker=worker, submitted=submitted,
                        interrupt=interrupt)
