"""Batch runs: many scripts from a JSONL file, results to a JSONL file, locally or on Ray.

- ``task``: the task line model and the streaming reader (bad lines become values).
- ``outcome``: one task's record (execution result + id, worker, timings).
- ``executor``: the executor seam, :func:`run_task`, and a fake for tests.
- ``local``: threads on this machine; ``ray_executor`` (optional extra ``execengine[ray]``):
  an actor per node of a Ray cluster (``node_worker``), with driver-held tools served back
  on the driver (``driver_tools``).
- ``results``: the appending, resumable results file; ``progress``: progress and summary.
- ``runner``: :func:`run_batch`, which ties them together.

Nothing here imports Ray until a :class:`RayExecutor` is built (the ``ray`` extra).
"""

from __future__ import annotations

from execengine.batch.executor import Executor, FakeExecutor, run_task
from execengine.batch.local import LocalExecutor, default_concurrency
from execengine.batch.outcome import INVALID, STATUSES, WORKER_LOST, TaskOutcome, Timings
from execengine.batch.progress import Progress, Summary
from execengine.batch.ray_executor import RayExecutor
from execengine.batch.results import ResultWriter
from execengine.batch.runner import run_batch
from execengine.batch.task import InvalidLine, Task, parse_task, read_tasks

__all__ = [
    "INVALID",
    "STATUSES",
    "WORKER_LOST",
    "Executor",
    "FakeExecutor",
    "InvalidLine",
    "LocalExecutor",
    "Progress",
    "RayExecutor",
    "ResultWriter",
    "Summary",
    "Task",
    "TaskOutcome",
    "Timings",
    "default_concurrency",
    "parse_task",
    "read_tasks",
    "run_batch",
    "run_task",
]

