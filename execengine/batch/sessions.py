"""Tasks of one session run one at a time, in the order of the tasks file.

A session's tasks are cells of one persistent interpreter: the second may use what the
first defined, so they must not overlap or reorder. :class:`SessionOrder` stands between
the task source and an executor: :meth:`next` hands out the next task that may start now,
holding back one whose session has a task running, until :meth:`finished` releases it.
Tasks without a session pass straight through. At most ``hold`` tasks are held at once;
beyond that :meth:`next` stops reading the source (backpressure still holds).
"""

from __future__ import annotations

import collections
from collections.abc import Iterable

from execengine.batch.task import Task


class SessionOrder:
    def __init__(self, tasks: Iterable[Task], *, hold: int) -> None:
        self._source = iter(tasks)
        self._hold = max(1, hold)
        self._busy: set[str] = set()
        self._waiting: dict[str, collections.deque[Task]] = {}
        self._ready: collections.deque[Task] = collections.deque()
        self._held = 0
        self._exhausted = False

    @property
    def held(self) -> int:
        """Tasks read from the source and not handed out yet."""
        return self._held + len(self._ready)

    @property
    def drained(self) -> bool:
        """The source is read to its end and every task was handed out."""
        return self._exhausted and not self._held and not self._ready

    def next(self) -> Task | None:
        """The next task that may start now, or None (nothing can start until a task
        finishes, or the source is drained)."""
        if self._ready:
            return self._ready.popleft()
        while not self._exhausted and self._held < self._hold:
            task = next(self._source, None)
            if task is None:
                self._exhausted = True
                break
            if task.session is None:
                return task
            if task.session in self._busy:
                self._waiting.setdefault(task.session, collections.deque()).append(task)
                self._held += 1
                continue
            self._busy.add(task.session)
            return task
        return None

    def put_back(self, task: Task) -> None:
        """A task handed out that could not be placed after all: it goes first next time."""
        self._ready.appendleft(task)

    def finished(self, task: Task) -> None:
        """``task`` has a result: the next task of its session may start."""
        if task.session is None:
            return
        queue = self._waiting.get(task.session)
        if queue:
            self._held -= 1
            self._ready.append(queue.popleft())
            if not queue:
                del self._waiting[task.session]
        else:
            self._busy.discard(task.session)
