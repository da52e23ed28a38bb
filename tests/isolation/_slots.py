"""Holding a sandbox uid slot from a test, so that the next launch runs as another uid."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

from execengine.isolation.uids import BASE_UID, MAX_SLOTS, SLOT_DIR


@contextlib.contextmanager
def another_slot_next(uid: int) -> Iterator[None]:
    """Hold the slot of ``uid`` (its lock, as a launcher does; waiting until its launcher
    lets it go) for the ``with`` block: a launch in it runs as another slot uid."""
    slot = uid - BASE_UID
    if not 0 <= slot < MAX_SLOTS:
        yield  # not a slot uid (the host is not root): nothing to hold
        return
    fd = os.open(os.path.join(SLOT_DIR, f"{slot}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
