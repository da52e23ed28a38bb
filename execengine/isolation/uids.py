"""Per-sandbox user ids for a root host.

Each concurrent sandbox runs as its own unprivileged uid (``BASE_UID + slot``) with the shared
group ``SANDBOX_GID``. A distinct uid makes ``RLIMIT_NPROC`` a per-sandbox process cap and
makes "every process of this uid" exactly "every process of this execution", which is how
a sandbox without a pid namespace or cgroup is killed completely.

Slots are claimed across processes (two engines on one host) with an exclusive ``flock``
on ``<SLOT_DIR>/<slot>.lock``, held for as long as the sandbox lives. The holder writes its
owner tag into the file (:meth:`UidSlot.take_over`), so the next one knows whether another
process held the slot since: a host that was killed with its spawner may have left
processes of that uid running. The ids sit far above any range that ``useradd`` allocates
from, so they never belong to a real account. Standard library only: the remote file
server imports this module too.
"""

from __future__ import annotations

import fcntl
import os
import threading
from dataclasses import dataclass, field

BASE_UID = 1_870_000_000
SANDBOX_GID = 1_870_000_000
MAX_SLOTS = 4096
SLOT_DIR = "/run/execengine/slots"


@dataclass
class UidSlot:
    slot: int
    uid: int
    gid: int
    _fd: int | None = field(default=None, repr=False)

    def take_over(self, owner: str) -> bool:
        """Write ``owner`` (a process's tag: :func:`execengine.hostdirs.owner_tag`) into
        the slot's lock file; whether another owner's tag, or none, was there: then what
        that process ran as this uid may still run."""
        if self._fd is None:
            return True
        mine = owner.encode()
        try:
            before = os.pread(self._fd, 64, 0)
            if before != mine:
                os.ftruncate(self._fd, 0)
                os.pwrite(self._fd, mine, 0)
        except OSError:
            return True
        return before != mine

    def release(self) -> None:
        """Free the slot (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing drops the flock

    def __enter__(self) -> UidSlot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def is_slot_uid(uid: int) -> bool:
    """Whether ``uid`` is one a sandbox runs as (a slot of the default pool)."""
    return BASE_UID <= uid < BASE_UID + MAX_SLOTS


class UidPool:
    """Hands out free slots; thread-safe; lock files make it safe across processes."""

    def __init__(self, slot_dir: str = SLOT_DIR, base_uid: int = BASE_UID,
                 gid: int = SANDBOX_GID, size: int = MAX_SLOTS) -> None:
        self.slot_dir = slot_dir
        self.base_uid = base_uid
        self.gid = gid
        self.size = size
        self._lock = threading.Lock()

    def acquire(self) -> UidSlot:
        os.makedirs(self.slot_dir, mode=0o700, exist_ok=True)
        with self._lock:
            # lowest free slot first: a slot is swept once per launcher on first use
            # (leftovers of a crashed host), so reusing few slots keeps that off launches
            for slot in range(self.size):
                path = os.path.join(self.slot_dir, f"{slot}.lock")
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                return UidSlot(slot, self.base_uid + slot, self.gid, fd)
        raise OSError("no free sandbox uid slot")
