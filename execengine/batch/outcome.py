"""What one task produced: the execution result plus where and when it ran.

A record (one JSONL line of the output) is the :class:`~execengine.ExecutionResult` fields
plus ``id``, ``line``, ``worker``, ``attempts``, ``timings`` and the task's ``meta``. Besides
the execution statuses (success, error, timeout, interrupted) a batch has two of its own:
``invalid`` (the task line could not be read) and ``worker_lost`` (the process or node
running it went away before it answered).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from execengine.batch.task import InvalidLine, Task
from execengine.engine.result import ExecutionResult

INVALID = "invalid"
WORKER_LOST = "worker_lost"
#: every status a record may carry, in the order the summary lists them
STATUSES = ("success", "error", "timeout", "interrupted", WORKER_LOST, INVALID)


@dataclass(frozen=True)
class Timings:
    """Wall-clock times (seconds since the epoch) and the spans between them."""

    submitted: float
    started: float
    finished: float

    @property
    def run_seconds(self) -> float:
        return max(0.0, self.finished - self.started)

    def to_dict(self) -> dict[str, float]:
        return {"submitted_at": round(self.submitted, 6), "started_at": round(self.started, 6),
                "finished_at": round(self.finished, 6),
                "queue_seconds": round(max(0.0, self.started - self.submitted), 6),
                "run_seconds": round(self.run_seconds, 6),
                "total_seconds": round(max(0.0, self.finished - self.submitted), 6)}


@dataclass(frozen=True)
class TaskOutcome:
    id: str | None
    line: int
    result: ExecutionResult
    worker: str = ""
    attempts: int = 1
    timings: Timings = field(default_factory=lambda: Timings(*(time.time(),) * 3))
    meta: Any = None
    #: the task, when a retry could run it again (not serialised)
    task: Task | None = field(default=None, compare=False, repr=False)

    @property
    def status(self) -> str:
        return self.result.status

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {"id": self.id, "line": self.line}
        record.update(self.result.to_dict())
        record.update(worker=self.worker, attempts=self.attempts,
                      timings=self.timings.to_dict())
        if self.meta is not None:
            record["meta"] = self.meta
        return record


def invalid_outcome(item: InvalidLine) -> TaskOutcome:
    now = time.time()
    return TaskOutcome(id=item.id, line=item.line,
                       result=ExecutionResult(INVALID, error=item.reason),  # type: ignore[arg-type]
                       worker="", attempts=0, timings=Timings(now, now, now))


def lost_outcome(task: Task, worker: str, reason: str, *, attempts: int,
                 submitted: float) -> TaskOutcome:
    now = time.time()
    return TaskOutcome(id=task.id, line=task.line,
                       result=ExecutionResult(WORKER_LOST,  # type: ignore[arg-type]
                                              error=f"worker lost: {reason}"),
                       worker=worker, attempts=attempts, timings=Timings(submitted, now, now),
                       meta=task.meta, task=task)
