"""Resource limits of one sandboxed process tree (setrlimit), applied in the child.

``RLIMIT_DATA`` rather than ``RLIMIT_AS`` for memory: DATA counts what a program really
allocates (heap and private writable mappings) but not reserved address space, so libraries
that reserve large virtual ranges (thread stacks, arenas, JITs) keep working while a memory
bomb still fails with ``MemoryError``. The cgroup memory limit (level ``isolated``) caps
the whole tree; rlimits are per process.

``RLIMIT_NPROC`` counts the tasks of the *real uid* system-wide and is ignored for uid 0.
As root it is applied after the drop to a per-sandbox uid (see :mod:`.uids`), so it is
exactly ``max_processes``. A host that is not root has no uid to drop to: the script shares
the host's uid, so its limit is the tasks that uid runs at launch plus ``max_processes``
(:func:`tasks_of_uid`). The kernel checks the limit of the *forking* process only, so the
host's own processes are never refused; the sandbox's allowance moves with the host's
activity, which is as close as an rlimit can get without a uid of its own.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from execengine.launch.base import LaunchLimits

MIB = 1024 * 1024
#: open files per process
NOFILE = 1024
#: the limits an interpreter started ahead sets from each plan (see ``sandbox/zygote.py``):
#: the CPU time (each plan's own), and the open files (after the plan's descriptors are in
#: place, some at their numbers in the host, which may be above it)
PLAN_RLIMITS = (resource.RLIMIT_CPU, resource.RLIMIT_NOFILE)


@dataclass(frozen=True)
class Rlimits:
    data_bytes: int | None
    cpu_seconds: int | None
    fsize_bytes: int | None
    nproc: int | None
    nofile: int = NOFILE

    @classmethod
    def from_limits(cls, limits: LaunchLimits, *, nproc: int | None) -> Rlimits:
        """``nproc``: the RLIMIT_NPROC value (see the module docstring), None for none."""
        return cls(
            data_bytes=limits.memory_mb * MIB if limits.memory_mb else None,
            cpu_seconds=limits.cpu_seconds,
            fsize_bytes=limits.max_file_mb * MIB if limits.max_file_mb else None,
            nproc=nproc,
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


def tasks_of_uid(uid: int, *, proc: str = "/proc") -> int:
    """Tasks (threads included, as RLIMIT_NPROC counts them) whose real uid is ``uid``."""
    count = 0
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        try:
            with open(f"{proc}/{name}/status", "rb") as f:
                status = f.read()
        except OSError:
            continue  # gone meanwhile
        real_uid = threads = None
        for line in status.split(b"\n"):
            if line.startswith(b"Uid:"):
                real_uid = int(line.split()[1])
            elif line.startswith(b"Threads:"):
                threads = int(line.split()[1])
        if real_uid == uid and threads:
            count += threads
    return count
