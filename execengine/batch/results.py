"""The results file: JSONL records appended as tasks finish, and what a rerun skips.

Opening a :class:`ResultWriter` on an existing file resumes it: the records already there
name the tasks that are done (by ``id``; an ``invalid`` record by its ``line``, so a fixed
line runs on the next pass). A last line cut short (the previous run was killed mid-write)
is dropped; the file is truncated back to its last complete record before appending. A
last line that is a whole record but lacks its newline (an editor, a copy) counts: its
task is not run again, and the newline is added before the next record. Each record is
flushed as it is written, so a stopped run loses nothing it finished.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from dataclasses import dataclass, field
from typing import IO

from execengine.batch.outcome import INVALID, TaskOutcome
from execengine.batch.task import InvalidLine, Task
from execengine.errors import BatchError

log = logging.getLogger(__name__)


@dataclass
class Done:
    """What an earlier run of the same output already recorded."""

    ids: set[str] = field(default_factory=set)
    invalid_lines: set[int] = field(default_factory=set)
    records: int = 0
    #: bytes of a cut-off last line that were dropped
    dropped_bytes: int = 0
    #: the last record has no newline after it (one is written before the next record)
    unterminated: bool = False

    def covers(self, item: Task | InvalidLine) -> bool:
        if isinstance(item, Task):
            return item.id in self.ids
        return item.line in self.invalid_lines


def scan(path: str) -> tuple[Done, int]:
    """Read an existing output: what it records and where its last complete line ends."""
    done = Done()
    good_end = 0
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except FileNotFoundError:
        return done, 0
    except OSError as exc:
        raise BatchError(f"cannot read results file {path}: {exc}") from exc
    with f:
        offset = 0
        for number, raw in enumerate(f, start=1):
            offset += len(raw)
            last = not raw.endswith(b"\n")
            try:
                record = json.loads(raw)
                rid, status = record.get("id"), record.get("status")
            except (ValueError, AttributeError, RecursionError):
                if last:  # the last line, cut short
                    done.dropped_bytes = len(raw)
                    break
                log.warning("%s:%d: not a result record; ignored", path, number)
                good_end = offset
                continue
            good_end = offset
            done.unterminated = last
            done.records += 1
            if status == INVALID:
                if isinstance(record.get("line"), int):
                    done.invalid_lines.add(record["line"])
            elif isinstance(rid, str):
                done.ids.add(rid)
    return done, good_end


class ResultWriter:
    """Appends records to ``path``; with ``restart`` the file is emptied first."""

    def __init__(self, path: str, *, restart: bool = False) -> None:
        self.path = path
        if restart:
            self.done, end = Done(), 0
        else:
            self.done, end = scan(path)
        try:
            self._file: IO[str] | None = open(path, "a+", encoding="utf-8")  # noqa: SIM115
            self._file.truncate(end)
            self._file.seek(end)
            if self.done.unterminated:
                self._file.write("\n")
                self._file.flush()
            st = os.fstat(self._file.fileno())
        except OSError as exc:
            raise BatchError(f"cannot write results file {path}: {exc}") from exc
        self._identity = (st.st_dev, st.st_ino)
        self.written = 0

    def write(self, outcome: TaskOutcome) -> None:
        if self._file is None:
            raise BatchError("the results file is closed")
        self._file.write(json.dumps(outcome.to_record(), ensure_ascii=False, default=str) + "\n")
        self._file.flush()
        self.written += 1

    def replaced(self) -> bool:
        """Whether ``path`` names another file than the one written (something with write
        access to its folder, a task at level ``none`` or ``restricted`` say, moved it)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return True
        return (st.st_dev, st.st_ino) != self._identity

    def close(self) -> None:
        """Close the file; :class:`BatchError` if it was moved or replaced meanwhile (its
        records are not where the next run, or the reader, would look)."""
        f, self._file = self._file, None
        if f is None:
            return
        with contextlib.suppress(OSError):
            os.fsync(f.fileno())
        f.close()
        if self.replaced():
            raise BatchError(
                f"the results file {self.path} was moved or replaced while the batch ran "
                f"(by a task with write access to its folder?): the {self.written} records "
                "written are not in the file now at that path; keep the results file "
                "outside the tasks' working directories")

    def __enter__(self) -> ResultWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
