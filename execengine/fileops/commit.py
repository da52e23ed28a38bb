"""Writing several files all or nothing.

Every change is staged first (new contents in temporary files next to their targets); only
when all are staged are they renamed into place and deletions done. If a step of that
commit fails, the files already changed are restored from the originals kept in memory, so
the tree ends as it started.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from execengine.errors import FileOpError
from execengine.fileops.paths import makedirs
from execengine.fileops.textio import atomic_write, real_target, settle, where_is


@dataclass
class Change:
    path: Path  # absolute target
    data: bytes | None  # None: delete the file
    original: bytes | None  # None: the file did not exist


class _Staged:
    def __init__(self, change: Change) -> None:
        self.change = change
        self.tmp: str | None = None

    def stage(self) -> None:
        data = self.change.data
        if data is None:
            return
        target = real_target(self.change.path)
        makedirs(target.parent)
        fd, self.tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                        dir=target.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            try:
                old: os.stat_result | None = os.lstat(target)
            except FileNotFoundError:
                old = None
            # on the descriptor, as atomic_write (the name may be a link by now)
            settle(fh.fileno(), old, os.path.join(where_is(target.parent), target.name))

    def commit(self) -> None:
        if self.change.data is None:
            os.unlink(self.change.path)
        else:
            assert self.tmp is not None
            os.replace(self.tmp, real_target(self.change.path))
            self.tmp = None

    def rollback(self) -> None:
        original = self.change.original
        with contextlib.suppress(OSError, FileOpError):
            if original is None:
                os.unlink(self.change.path)
            else:
                atomic_write(self.change.path, original)

    def discard(self) -> None:
        if self.tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.tmp)
            self.tmp = None


def commit_all(changes: list[Change]) -> None:
    """Apply ``changes`` together; :class:`FileOpError` (and nothing changed) on failure."""
    staged = [_Staged(c) for c in changes]
    done: list[_Staged] = []
    try:
        for s in staged:
            s.stage()
        for s in staged:
            s.commit()
            done.append(s)
    except OSError as exc:
        for s in reversed(done):
            s.rollback()
        where = getattr(exc, "filename", None) or "?"
        raise FileOpError(f"Writing the patch failed at {where!r}: {exc.strerror or exc}; "
                          "no file was changed") from exc
    finally:
        for s in staged:
            s.discard()
