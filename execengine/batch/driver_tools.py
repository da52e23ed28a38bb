"""Driver-held tools: served on the batch's driver, called from scripts on any node.

A tool registered with ``ToolPolicy(driver_held=True)`` holds something the nodes must not
see (a credential). The driver sends each node its schema (:func:`driver_tool_specs`); the
node registers a proxy (:func:`proxy_handler`) in its place. A call goes from the script to
its node's engine, to the :class:`DriverToolRelay` actor (``call``), which parks it until
the driver's :class:`DriverToolServer`, long-polling ``take``, dispatches it through the
driver's own registry (hooks, approval, caps) and posts the text back with ``reply``. The
relay only ever sees arguments and results. Nothing here imports Ray at module level.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from execengine.context import CallContext
from execengine.registry import Handler, ToolRegistry, error_result

log = logging.getLogger(__name__)

#: how long a node waits for the driver to answer a driver-held call
DRIVER_CALL_TIMEOUT = 300.0


class DriverToolRelay:
    """Parks driver-held calls until the driver takes them and replies (an async actor)."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._queue: asyncio.Queue[tuple[int, str, dict[str, Any], str | None]] | None = None
        self._waiting: dict[int, asyncio.Future[str]] = {}
        self._closed = False

    def _q(self) -> asyncio.Queue[tuple[int, str, dict[str, Any], str | None]]:
        if self._queue is None:  # created on the actor's loop
            self._queue = asyncio.Queue()
        return self._queue

    async def call(self, name: str, args: dict[str, Any], task_id: str | None) -> str:
        if self._closed:
            return error_result(f"{name}: the batch driver has stopped serving its tools")
        call_id = next(self._ids)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = future
        await self._q().put((call_id, name, args, task_id))
        try:
            return await future
        finally:
            self._waiting.pop(call_id, None)

    async def take(self, max_items: int, wait_seconds: float
                   ) -> list[tuple[int, str, dict[str, Any], str | None]]:
        queue = self._q()
        try:
            first = await asyncio.wait_for(queue.get(), wait_seconds)
        except asyncio.TimeoutError:
            return []
        items = [first]
        while len(items) < max_items and not queue.empty():
            items.append(queue.get_nowait())
        return items

    async def reply(self, call_id: int, text: str) -> None:
        future = self._waiting.get(call_id)
        if future is not None and not future.done():
            future.set_result(text)

    async def close(self) -> None:
        self._closed = True
        for future in list(self._waiting.values()):
            if not future.done():
                future.set_result(error_result(
                    "the batch driver has stopped serving its tools"))


def proxy_handler(relay: Any, name: str) -> Handler:
    """The node-side handler of a driver-held tool: ask the driver through the relay."""
    def handler(args: dict[str, Any], ctx: Any) -> str:
        import ray

        ref = relay.call.remote(name, args, ctx.task_id)
        try:
            return str(ray.get(ref, timeout=DRIVER_CALL_TIMEOUT))
        except ray.exceptions.GetTimeoutError:
            ray.cancel(ref)
            return error_result(f"{name}: the batch driver did not answer within "
                                f"{DRIVER_CALL_TIMEOUT:g}s")
        except ray.exceptions.RayError as exc:
            return error_result(f"{name}: the batch driver is unreachable: "
                                f"{type(exc).__name__}")

    return handler


def driver_tool_specs(registry: ToolRegistry) -> list[dict[str, Any]]:
    """Driver-held tools available here, as specs a node registers proxies from."""
    held = [e for e in registry.entries() if e.policy.driver_held]
    if not held:
        return []
    avail = registry.availability([e.name for e in held])
    out = []
    for entry in held:
        if not avail[entry.name].available:
            continue
        p = entry.policy
        out.append({"name": entry.name, "toolset": entry.toolset,
                    "schema": json.loads(json.dumps(dict(entry.schema))),
                    "policy": {"script_callable": p.script_callable,
                               "hidden_params": frozenset(p.hidden_params),
                               "agent_level": p.agent_level, "read_only": p.read_only,
                               "parallel_safe": p.parallel_safe, "driver_held": True}})
    return out


class DriverToolServer:
    """Serves driver-held calls parked at the relay, on this (the driver's) process."""

    def __init__(self, ray: Any, relay: Any, registry: ToolRegistry) -> None:
        self.ray, self.relay, self.registry = ray, relay, registry
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(8, thread_name_prefix="execengine-driver-tools")
        self._thread = threading.Thread(target=self._loop, name="execengine-driver-tools",
                                        daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                items = self.ray.get(self.relay.take.remote(64, 0.5), timeout=30)
            except Exception:
                if self._stop.is_set():
                    return
                log.warning("driver-held tools: the relay did not answer", exc_info=True)
                self._stop.wait(1.0)
                continue
            for call_id, name, args, task_id in items:
                self._pool.submit(self._serve, call_id, name, args, task_id)

    def _serve(self, call_id: int, name: str, args: dict[str, Any], task_id: str | None
               ) -> None:
        text = self.registry.dispatch(name, args, CallContext(task_id=task_id,
                                                              origin="execute_code"))
        self.relay.reply.remote(call_id, text)

    def close(self) -> None:
        self._stop.set()
        try:
            self.ray.get(self.relay.close.remote(), timeout=10)
        except Exception:
            log.debug("closing the driver-tool relay", exc_info=True)
        self._thread.join(timeout=5)
        self._pool.shutdown(wait=True)
