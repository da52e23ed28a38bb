"""Engines still open when the interpreter exits are closed then.

An engine holds what outlives the process unless it is closed: its staging, runtime and
socket folders, the ACL grants on its working directories, the private tmp folders and
cgroups of its sandboxes, its session kernels. A program that forgets ``close()`` (or ends
in ``sys.exit``) left 7 to 9 folders and a writable grant on its working directory behind.
So every engine is tracked here (weakly: tracking keeps nothing alive), and one ``atexit``
handler, registered with the first engine (nothing happens on import), closes those still
open, newest first. Closing is idempotent, so an engine closed already, by its program or
by the program's own ``atexit`` handler, is skipped. What runs that late must not need a
thread pool (``concurrent.futures`` refuses work once the interpreter shuts down): the
sandbox's deferred teardown then runs inline (:class:`execengine.launch.base.Background`).

A process killed by a signal runs no ``atexit`` handler; the spawner and the guards cover
that case (``docs/reliability.md``).
"""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from typing import Protocol

log = logging.getLogger(__name__)


class _Closable(Protocol):
    def close(self) -> None: ...


_open: weakref.WeakValueDictionary[int, _Closable] = weakref.WeakValueDictionary()
_lock = threading.Lock()
_registered = False
_ids = iter(range(1 << 62))


def close_at_exit(engine: _Closable) -> None:
    """Close ``engine`` when the interpreter exits, unless it is gone or closed by then."""
    global _registered
    with _lock:
        _open[next(_ids)] = engine
        if not _registered:
            atexit.register(close_all)
            _registered = True


def close_all() -> None:
    """Close every tracked engine still alive, newest first; never raises."""
    with _lock:
        engines = [e for _, e in sorted(_open.items(), reverse=True)]
        _open.clear()
    for engine in engines:
        try:
            engine.close()
        except Exception:  # one engine's failure must not keep the others open
            log.warning("closing an engine at exit failed", exc_info=True)
