"""Resource limits of one sandboxed process tree (setrlimit), applied in the child.

``RLIMIT_DATA`` rather than ``RLIMIT_AS`` for memory: DATA counts what a program really
allocates (heap and private writable mappings) but not reserved address space, so libraries
that reserve large virtual ranges (thread stacks, arenas, JITs) keep working while a memory
bomb still fails with ``MemoryError``. The cgroup memory limit (level ``isolated``) caps
the whole tree; rlimits are per process.

``RLIMIT_NPROC`` counts the tasks of the *real uid* system-wide and is ignored for uid 0, so
it is only applied after the drop to a per-sandbox uid (see :mod:`.uids`).
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

from execengine.launch.base import LaunchLimits

MIB = 1024 * 1024
#: open files per process
NOFILE = 1024


@dataclass(frozen=True)
class Rlimits:
    data_bytes: int | None
    cpu_seconds: int | None
    fsize_bytes: int | None
    nproc: int | None
    nofile: int = NOFILE

    @classmethod
    def from_limits(cls, limits: LaunchLimits, *, nproc: bool) -> Rlimits:
        return cls(
            data_bytes=limits.memory_mb * MIB if limits.memory_mb else None,
            cpu_seconds=limits.cpu_seconds,
            fsize_bytes=limits.max_file_mb * MIB if limits.max_file_mb else None,
            nproc=limits.max_processes if nproc else None,
        )

    def pairs(self) -> list[tuple[int, int, int]]:
        """``(resource, soft, hard)`` triples."""
        out = [(resource.RLIMIT_CORE, 0, 0)]
        if self.data_bytes:
            out.append((resource.RLIMIT_DATA, self.data_bytes, self.data_bytes))
        if self.cpu_seconds:
            # SIGXCPU at the soft limit (a Python traceback-less death), SIGKILL one later
            out.append((resource.RLIMIT_CPU, self.cpu_seconds, self.cpu_seconds + 1))
        if self.fsize_bytes:
            out.append((resource.RLIMIT_FSIZE, self.fsize_bytes, self.fsize_bytes))
        if self.nproc:
            out.append((resource.RLIMIT_NPROC, self.nproc, self.nproc))
        out.append((resource.RLIMIT_NOFILE, self.nofile, self.nofile))
        return out

    def apply(self) -> None:
        """Lower the limits of the calling process; a limit above the current hard limit
        is clamped to it (a host without CAP_SYS_RESOURCE cannot raise hard limits)."""
        for res, soft, hard in self.pairs():
            _, cur_hard = resource.getrlimit(res)
            if cur_hard != resource.RLIM_INFINITY:
                hard = min(hard, cur_hard)
                soft = min(soft, hard)
            resource.setrlimit(res, (soft, hard))
