"""Spill files: the full stdout of truncated executions, kept for the model, but bounded.

A truncated result points at its spill file, so the file outlives the execution (and the
engine). To keep the per-user spill directory from growing without end, an engine prunes
it when it starts: files older than ``code_execution.spill_max_age_hours`` go first, then
the oldest ones until the rest fits ``code_execution.spill_max_mb``.
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
import time

log = logging.getLogger(__name__)

#: names of spill files (see :class:`~execengine.launch.supervise.OutputCapture`)
SPILL_PREFIX = "execengine-"
SPILL_SUFFIX = ".txt"


def spill_dir() -> str:
    """Where full outputs of truncated executions are kept (per user, private)."""
    return os.path.join(tempfile.gettempdir(), f"execengine-output-{os.getuid()}")


def prune(directory: str, *, max_age_seconds: float, max_bytes: int,
          now: float | None = None) -> list[str]:
    """Delete spill files in ``directory`` older than ``max_age_seconds``, then the oldest
    until the total is at most ``max_bytes``; return the removed paths. Only regular files
    named like spill files and owned by this user are considered. Never raises."""
    now = time.time() if now is None else now
    uid = os.getuid()
    files: list[tuple[float, int, str]] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return []
    for entry in entries:
        if not (entry.name.startswith(SPILL_PREFIX) and entry.name.endswith(SPILL_SUFFIX)):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_uid == uid:
            files.append((st.st_mtime, st.st_size, entry.path))
    files.sort()  # oldest first
    total = sum(size for _, size, _ in files)
    removed: list[str] = []
    for mtime, size, path in files:
        if now - mtime <= max_age_seconds and total <= max_bytes:
            break
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError:
            continue
        total -= size
        removed.append(path)
    if removed:
        log.info("pruned %d spill files from %s", len(removed), directory)
    return removed
