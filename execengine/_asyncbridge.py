"""The one background reactor: an event loop in a daemon thread, for async work of sync code.

Async tool handlers (:func:`execengine.registry.dispatch`), the approval gate and the MCP client
(:mod:`execengine.mcp.manager`: its server connections live on this loop) all run here, so
clients bound to a loop (HTTP sessions, MCP sessions) stay valid across calls and the
process has one such thread, not one per user. Synchronous callers, from any thread,
submit and wait; async callers await without blocking their own loop. A sync call made
from inside a running loop also goes to the bridge loop (loops never nest); it blocks its
caller, as any sync call does, which is why hosts with a loop should use the async entry
point. A blocking wait *on the reactor's own thread* would wait forever; :meth:`AsyncBridge.run`
refuses it with a clear error instead.

Lifetime: the process-wide reactor (:func:`bridge`) starts with the first coroutine and
stops at interpreter exit. Its users release what they put on it (a manager closes its
connections) and never stop the loop itself: other users share it.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class AsyncBridge:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=run, name="execengine-async", daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the reactor; a future to wait on (from another thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self._ensure())

    def on_reactor(self) -> bool:
        """Whether the caller runs on the reactor's thread (where it must not block)."""
        return self._thread is not None and threading.current_thread() is self._thread

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the reactor and wait for its value (not from the reactor)."""
        if self.on_reactor():
            coro.close()
            raise RuntimeError("a blocking call into the background reactor from its own "
                               "thread would wait forever (an async tool made a synchronous "
                               "call that needs the reactor: await the async form instead)")
        return self.submit(coro).result(timeout)

    async def run_async(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(self.submit(coro))

    def close(self) -> None:
        """Stop the loop and its thread (the process-wide one: at exit only)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(5)
        if not loop.is_running():
            loop.close()


_bridge = AsyncBridge()
atexit.register(_bridge.close)


def bridge() -> AsyncBridge:
    """The process-wide bridge (created lazily: no thread until an async tool runs)."""
    return _bridge
