"""The node side of a Ray batch: one :class:`NodeWorker` actor per node.

A plain class; :mod:`execengine.batch.ray_executor` wraps it with ``ray.remote`` when a
batch starts, so importing this module does not import Ray. Workers import it by name:
every node needs execengine (and the config's plugins) installed.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from execengine.batch.driver_tools import proxy_handler
from execengine.batch.executor import run_task
from execengine.batch.task import Task
from execengine.config import Config
from execengine.engine import Engine
from execengine.engine.core import configured_registry
from execengine.policy import ToolPolicy


class NodeWorker:
    """One engine on one node, running up to ``slots`` tasks at a time (an async actor)."""

    def __init__(self, config: Config, slots: int, relay: Any,
                 driver_tools: list[dict[str, Any]]) -> None:
        self.registry = configured_registry(config)  # its own MCP servers, as a local run
        for spec in driver_tools:
            self.registry.register(spec["name"], spec["toolset"], spec["schema"],
                                   proxy_handler(relay, spec["name"]), override=True,
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
