"""A batch run: tasks file in, results file out, through one executor."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TextIO

from execengine.batch.executor import Executor
from execengine.batch.outcome import invalid_outcome
from execengine.batch.progress import Progress, Summary
from execengine.batch.results import ResultWriter
from execengine.batch.task import InvalidLine, Task, read_tasks
from execengine.errors import BatchError


def count_lines(path: str) -> int:
    """Non-blank lines of ``path`` (the progress bar's total)."""
    with open(path, "rb") as f:
        return sum(1 for raw in f if raw.strip())


def run_batch(tasks: str, out: str, executor: Executor, *, restart: bool = False,
              stop: threading.Event | None = None, progress: bool | None = None,
              stream: TextIO | None = None) -> Summary:
    """Run every task of the JSONL file ``tasks`` not already recorded in ``out``.

    Records are appended to ``out`` in completion order; bad task lines are recorded as
    ``invalid`` and the batch goes on. ``stop`` (set it from a signal handler) ends the run
    early with everything finished so far written. ``progress``: draw a progress line on
    ``stream`` (default stderr; None: only when it is a terminal).
    """
    stop = stop or threading.Event()
    summary = Summary()
    bar = Progress(summary, stream=stream, enabled=progress)
    try:
        open(tasks, "rb").close()
        total = count_lines(tasks) if bar.enabled else None  # a second pass, for the bar only
    except OSError as exc:
        raise BatchError(f"cannot read tasks file {tasks}: {exc}") from exc
    with ResultWriter(out, restart=restart) as writer:
        if total is not None:
            bar.total = max(0, total - writer.done.records)

        def feed() -> Iterator[Task]:
            # pulled by the executor in the thread that iterates its run(): one writer thread
            for item in read_tasks(tasks):
                if writer.done.covers(item):
                    summary.skipped += 1
                elif isinstance(item, InvalidLine):
                    outcome = invalid_outcome(item)
                    writer.write(outcome)
                    summary.add(outcome)
                else:
                    yield item
                if stop.is_set():
                    return

        try:
            for outcome in executor.run(feed(), stop=stop):
                writer.write(outcome)
                summary.add(outcome)
                bar.update()
        finally:
            summary.stopped = stop.is_set()
            summary.finished = summary.started + summary.elapsed
            bar.finish()
    return summary
