"""The code that runs inside Ray actors: one :class:`NodeWorker` per node, one
:class:`DriverToolRelay` beside the driver.

These are plain classes; :mod:`execengine.batch.ray_executor` wraps them with
``ray.remote`` when a batch starts, so importing this module does not import Ray. Workers
import it by name: every node needs execengine (and the config's plugins) installed.

A driver-held tool (``ToolPolicy(driver_held=True)``: it holds a credential the nodes must
not see) is registered on each node as a proxy with the driver's schema. A call goes from
the script to its node's engine, to the relay (``call``), which parks it until the driver,
long-polling ``take``, dispatches it through its own registry and posts the text back with
``reply``. The relay only ever sees arguments and results.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from execengine.batch.executor import run_task
from execengine.batch.task import Task
from execengine.config import Config
from execengine.dispatch import error_result
from execengine.engine import Engine
from execengine.policy import ToolPolicy
from execengine.registry import ToolRegistry

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


def _proxy(relay: Any, name: str) -> Any:
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


class NodeWorker:
    """One engine on one node, running up to ``slots`` tasks at a time (an async actor)."""

    def __init__(self, config: Config, slots: int, relay: Any,
                 driver_tools: list[dict[str, Any]]) -> None:
        self.registry = ToolRegistry.with_builtins(config)
        for spec in driver_tools:
            self.registry.register(spec["name"], spec["toolset"], spec["schema"],
                                   _proxy(relay, spec["name"]), override=True,
                                   policy=ToolPolicy(**spec["policy"]),
                                   source="driver (held by the batch driver)")
        self.engine = Engine(config=config, registry=self.registry)
        self.worker = f"ray:{socket.gethostname()}:{os.getpid()}"
        self.slots = slots
        self._pool = ThreadPoolExecutor(slots, thread_name_prefix="execengine-node")
        self._running: set[threading.Event] = set()
        self._stopping = False
        self._gate: asyncio.Semaphore | None = None  # created on the actor's loop

    def info(self) -> dict[str, Any]:
        import ray

        return {"worker": self.worker, "pid": os.getpid(), "slots": self.slots,
                "node_id": ray.get_runtime_context().get_node_id()}

    async def run(self, wire: dict[str, Any], submitted: float, attempts: int
                  ) -> dict[str, Any]:
        """Run one task; returns the result fields, the worker and the node's times.

        At most ``slots`` run at once; the driver may send one or two more, which wait
        here so the node never idles while the driver hands out the next task."""
        task = Task.from_wire(wire)
        interrupt = threading.Event()
        if self._stopping:
            interrupt.set()
        self._running.add(interrupt)
        if self._gate is None:
            self._gate = asyncio.Semaphore(self.slots)
        try:
            async with self._gate:
                loop = asyncio.get_running_loop()
                outcome = await loop.run_in_executor(
                    self._pool, lambda: run_task(self.engine, task, worker=self.worker,
                                                 submitted=submitted, interrupt=interrupt,
                                                 attempts=attempts))
        finally:
            self._running.discard(interrupt)
        return {"result": outcome.result.to_dict(), "worker": outcome.worker,
                "started": outcome.timings.started, "finished": outcome.timings.finished}

    async def stop(self) -> None:
        """Interrupt every running task; tasks arriving later stop at once."""
        self._stopping = True
        for event in list(self._running):
            event.set()

    async def close(self) -> None:
        await self.stop()
        await asyncio.get_running_loop().run_in_executor(None, self._close)

    def _close(self) -> None:
        self._pool.shutdown(wait=True)
        self.engine.close()
        self.registry.close()
