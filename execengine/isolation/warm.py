"""Work kept off a launch's critical path: warm sandbox entries, and deferred teardown.

Why: most of what entering a sandbox costs does not depend on the script. Creating a
cgroup and moving a process into it (the migration waits for an RCU grace period: 1-20 ms
on the hosts we measured), three forks of a Python process (about 1 ms each), the
namespaces, a uid slot and its first-use sweep — all of that can be done while the previous
script runs. A :class:`WarmPool` keeps ``size`` such entries ready; a launch takes one and
only sends the plan (:mod:`._spawnserver`). An empty pool or a mismatch (whether the entry has a
network namespace of its own) means a cold entry, prepared and used at once: same code, same
guarantees, just slower.

Likewise, removing an execution's (already empty) cgroup directories, revoking its ACL
grants and deleting its private tmp do not have to delay the result: :class:`Background`
runs them on one worker thread. It is bounded (each job is) and leak-free: ``close()``
runs every queued job before returning.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import operator
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


class Background:
    """One worker thread for deferred jobs; jobs run inline once it is closed."""

    def __init__(self, name: str = "execengine-sandbox") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False

    def submit(self, job: Callable[[], Any]) -> None:
        """Run ``job`` on the worker; inline once closed, or once the interpreter is
        shutting down (an engine closed from ``atexit``: the pool takes nothing then)."""
        with self._lock:
            if not self._closed:
                try:
                    if self._pool is None:
                        self._pool = ThreadPoolExecutor(1, thread_name_prefix=self._name)
                    self._pool.submit(_logged, job)
                    return
                except RuntimeError:  # "cannot schedule new futures after shutdown"
                    pass
        _logged(job)

    def close(self) -> None:
        """Run what is queued, then stop the thread (idempotent)."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


def _logged(job: Callable[[], Any]) -> None:
    try:
        job()
    except Exception:  # a background job has nobody to raise to
        log.warning("sandbox background job failed", exc_info=True)


@dataclass
class WarmEntry:
    """A prepared entry: the spawner-side id plus what the host made for it."""

    id: str
    key: Any  # what must match the launch (e.g. the network flag)
    resources: Any  # slot, cgroup: released by ``discard`` when the entry is not used
    #: the prepared process (host pid), from the moment it was forked
    pid: int = 0
    #: it starts the child's interpreter ahead (see ``sandbox/zygote.py``)
    prestarted: bool = False


class WarmPool:
    """Keeps up to ``size`` warm entries per key (thread-safe).

    ``make(key)`` prepares one (it runs on the background thread); ``discard(entry)`` kills
    an unused one and frees its resources. ``stale(have, want)``: whether an entry made
    for ``have`` is of no more use once ``want`` is asked for (default: any other key).
    """

    def __init__(self, make: Callable[[Any], WarmEntry], discard: Callable[[WarmEntry], None],
                 background: Background, size: int = 1,
                 stale: Callable[[Any, Any], bool] = operator.ne) -> None:
        self._make = make
        self._discard = discard
        self._bg = background
        self.size = size
        self._stale = stale
        self._lock = threading.Lock()
        self._entries: list[WarmEntry] = []
        self._pending: dict[Any, int] = {}
        self._closed = False
        #: consecutive failures to prepare; after a few the pool stops trying
        self._failures = 0

    def take(self, key: Any) -> WarmEntry | None:
        """A warm entry for ``key``, or None (the caller starts a cold one). Entries that
        are stale for ``key`` are discarded: the next ones are made for the key last asked
        for."""
        stale: list[WarmEntry] = []
        found = None
        with self._lock:
            keep = []
            for entry in self._entries:
                if entry.key == key and found is None:
                    found = entry
                elif entry.key != key and self._stale(entry.key, key):
                    stale.append(entry)
                else:
                    keep.append(entry)
            self._entries = keep
        for entry in stale:
            self._bg.submit(functools.partial(self._discard, entry))
        return found

    def refill(self, key: Any) -> None:
        """Ask the background thread to top the pool up with entries for ``key``."""
        with self._lock:
            have = sum(1 for e in self._entries if e.key == key)
            want = self.size - have - self._pending.get(key, 0)
            if self._closed or want <= 0 or self._failures >= 3:
                return
            self._pending[key] = self._pending.get(key, 0) + want
        for _ in range(want):
            self._bg.submit(functools.partial(self._fill, key))

    def _fill(self, key: Any) -> None:
        try:
            with self._lock:
                if self._closed:
                    return
            entry = self._make(key)
        except Exception:
            with self._lock:
                self._failures += 1
            log.debug("cannot prepare a warm sandbox entry", exc_info=True)
            return
        finally:
            with self._lock:
                self._pending[key] -= 1
        with self._lock:
            self._failures = 0
            if not self._closed:
                self._entries.append(entry)
                return
        self._discard(entry)

    def close(self) -> None:
        """Discard every unused entry (idempotent; the caller closes the background)."""
        with self._lock:
            self._closed = True
            entries, self._entries = self._entries, []
        for entry in entries:
            with contextlib.suppress(Exception):
                self._discard(entry)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def entries(self) -> list[WarmEntry]:
        """The entries ready now (a copy)."""
        with self._lock:
            return list(self._entries)
