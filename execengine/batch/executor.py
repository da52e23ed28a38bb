"""The executor seam: where a batch's tasks run.

An :class:`Executor` takes an iterable of tasks and yields one :class:`TaskOutcome` per task,
in completion order. It pulls tasks lazily and keeps at most ``concurrency`` of them in
flight, so a large file is never all in memory or all submitted. Setting ``stop`` ends the
run early: no new task starts, running ones are interrupted, and their outcomes are *not*
yielded (a resumed run starts them again). Implementations: :class:`LocalExecutor` (threads
on this machine), :class:`RayExecutor` (an actor per node of a Ray cluster), and
:class:`FakeExecutor` for tests of what sits above the seam.

:func:`run_task` is the one place a task becomes an ``Engine.execute`` call; both real
executors use it (the Ray actor on its node).
"""

from __future__ import annotations

import inspect
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from execengine.batch.outcome import TaskOutcome, Timings
from execengine.batch.task import Task
from execengine.engine import Engine, ExecutionResult

SESSIONS_UNSUPPORTED = ("this engine does not support sessions: 'session' needs an "
                        "execengine with session support (remove the key to run without)")


class Executor(ABC):
    """Runs tasks; a context manager whose :meth:`close` is idempotent."""

    #: tasks in flight at most
    concurrency: int

    @abstractmethod
    def run(self, tasks: Iterable[Task], *, stop: threading.Event | None = None
            ) -> Iterator[TaskOutcome]:
        """One outcome per task, in completion order (see the module docstring)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the executor holds (engines, actors)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def supports_sessions(engine: Engine) -> bool:
    """Whether ``Engine.execute`` takes a ``session`` (issue 14 adds it)."""
    return "session" in inspect.signature(engine.execute).parameters


def run_task(engine: Engine, task: Task, *, worker: str, submitted: float,
             interrupt: threading.Event | None = None, attempts: int = 1) -> TaskOutcome:
    """Run one task on ``engine``; never raises for what the task or the engine does."""
    started = time.time()
    kwargs: dict[str, Any] = {"task_id": f"batch:{task.id}", "cwd": task.cwd,
                              "enabled_toolsets": list(task.toolsets)
                              if task.toolsets is not None else None,
                              "timeout": task.timeout, "mode": task.mode,
                              "interrupt": interrupt}
    result: ExecutionResult
    if task.session is not None:
        if supports_sessions(engine):
            kwargs["session"] = task.session
        else:
            result = ExecutionResult("error", error=SESSIONS_UNSUPPORTED)
            return _outcome(task, result, worker, submitted, started, attempts)
    try:
        result = engine.execute(task.code, **kwargs)
    except Exception as exc:  # the engine's own breakage is this task's error, not the batch's
        result = ExecutionResult("error", error=f"engine error: {type(exc).__name__}: {exc}")
    return _outcome(task, result, worker, submitted, started, attempts)


def _outcome(task: Task, result: ExecutionResult, worker: str, submitted: float,
             started: float, attempts: int) -> TaskOutcome:
    return TaskOutcome(id=task.id, line=task.line, result=result, worker=worker,
                       attempts=attempts, timings=Timings(submitted, started, time.time()),
                       meta=task.meta, task=task)


class FakeExecutor(Executor):
    """Runs tasks in the calling thread through ``fn(task) -> ExecutionResult``: the
    in-memory twin for tests of the runner, the writer and the summary."""

    def __init__(self, fn: Callable[[Task], ExecutionResult], *, concurrency: int = 1,
                 stop_after: int | None = None) -> None:
        self.fn = fn
        self.concurrency = concurrency
        self.pulled = 0
        self._stop_after = stop_after

    def run(self, tasks: Iterable[Task], *, stop: threading.Event | None = None
            ) -> Iterator[TaskOutcome]:
        for task in tasks:
            if stop is not None and stop.is_set():
                return
            self.pulled += 1
            if self._stop_after is not None and self.pulled > self._stop_after:
                if stop is not None:
                    stop.set()
                return
            submitted = started = time.time()
            yield _outcome(task, self.fn(task), "fake", submitted, started, 1)
