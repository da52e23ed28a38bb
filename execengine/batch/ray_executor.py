"""The Ray executor: the same batch on a Ray cluster, one long-lived actor per node.

Each alive node with CPUs gets a :class:`~execengine.batch.node_worker.NodeWorker` pinned to
it (an engine with the node's own isolation and warm pool, and a registry built from the
same config and plugins); it runs as many tasks at once as the node has CPUs (or
``concurrency`` spread over the nodes). The driver keeps at most that many tasks running,
and pulls the next task from the file only when one finishes (backpressure: never the
whole file in flight). ``prefetch`` lets that many more wait on each node, so a node does
not idle while the driver hands out the next task; but a waiting task lost with its
worker is reported ``worker_lost`` although it never started, so the default is none.
Tool calls run on the node, except driver-held tools, which the driver serves (see
:mod:`~execengine.batch.driver_tools`).

Tasks of one session run one at a time, in file order, all on the worker that ran the
session's first task (its interpreter lives there); if that worker dies, the session's
remaining tasks get ``worker_lost`` without running.

A worker lost mid-task (its process or node died) gives each of its in-flight tasks a
``worker_lost`` result, or, for a task marked ``retry_safe``, another run elsewhere (up to
``retries`` more). A worker on a node still alive is replaced, at most ``replacements``
times in all; when none is left the batch stops with :class:`BatchError` (everything
finished so far is recorded: rerun to resume).
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from execengine.batch.driver_tools import DriverToolRelay, DriverToolServer, driver_tool_specs
from execengine.batch.executor import Executor
from execengine.batch.node_worker import NodeWorker
from execengine.batch.outcome import TaskOutcome, Timings, lost_outcome
from execengine.batch.sessions import SessionOrder
from execengine.batch.task import Task
from execengine.config import Config
from execengine.engine import ExecutionResult
from execengine.errors import BatchError
from execengine.registry import ToolRegistry

log = logging.getLogger(__name__)

POLL_SECONDS = 0.2
#: how long a stopped run waits for interrupted tasks to report
STOP_GRACE_SECONDS = 30.0


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise BatchError("running a batch on Ray needs the ray extra: "
                         "pip install 'execengine[ray]'") from exc
    return ray


@dataclass
class _Slot:
    """One node worker and the tasks it holds."""

    actor: Any
    node_id: str
    slots: int
    worker: str = ""
    inflight: int = 0
    alive: bool = True


@dataclass
class _Flight:
    task: Task
    slot: _Slot
    submitted: float
    attempts: int


@dataclass
class _Retry:
    task: Task
    attempts: int
    submitted: float = field(default_factory=time.time)


class RayExecutor(Executor):
    """Runs tasks on a Ray cluster (see the module docstring).

    ``address``: ``None`` uses the Ray this process is connected to, or starts a local one;
    ``"auto"`` joins the cluster this machine belongs to; otherwise a cluster address
    (``HOST:PORT`` or ``ray://HOST:PORT``). Ray is shut down on :meth:`close` only if this
    executor initialised it. ``registry``: the driver's registry, serving driver-held tools
    (default: built from ``config``).
    """

    def __init__(self, *, config: Config | None = None, address: str | None = None,
                 concurrency: int | None = None, retries: int = 2, replacements: int = 8,
                 registry: ToolRegistry | None = None, prefetch: int = 0,
                 start_timeout: float = 180.0,
                 init_kwargs: dict[str, Any] | None = None) -> None:
        if concurrency is not None and concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.ray = ray = import_ray()
        self.config = config or Config()
        self.retries = max(0, retries)
        self.prefetch = max(0, prefetch)
        self._replacements_left = replacements
        self._start_timeout = start_timeout
        self._closed = False
        self._own_ray = False
        self._slots: list[_Slot] = []
        self._relay: Any = None
        self._server: DriverToolServer | None = None
        self._own_registry = registry is None
        self.registry = registry if registry is not None else ToolRegistry.with_builtins(
            self.config)
        try:
            if not ray.is_initialized():
                os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
                kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                          "logging_level": logging.WARNING}
                kwargs.update(init_kwargs or {})
                try:
                    ray.init(address=address, **kwargs)
                except (ConnectionError, RuntimeError, ValueError) as exc:
                    where = address or "a new local cluster"
                    raise BatchError(f"cannot connect to Ray at {where}: {exc}") from exc
                self._own_ray = True
            self._start(concurrency)
        except BaseException:
            self.close()
            raise

    # -- start-up -------------------------------------------------------------------------

    def _start(self, concurrency: int | None) -> None:
        ray = self.ray
        nodes = [n for n in ray.nodes() if n.get("Alive") and n["Resources"].get("CPU", 0) > 0]
        if not nodes:
            raise BatchError("the Ray cluster has no alive node with CPUs")
        if concurrency is None:
            per_node = [max(1, int(n["Resources"]["CPU"])) for n in nodes]
        else:  # spread exactly; with fewer slots than nodes, some nodes get no worker
            base, extra = divmod(concurrency, len(nodes))
            per_node = [base + (1 if i < extra else 0) for i in range(len(nodes))]
            nodes = [n for n, k in zip(nodes, per_node, strict=True) if k]
            per_node = [k for k in per_node if k]
        self.concurrency = sum(per_node)
        self._driver_tools = driver_tool_specs(self.registry)

        relay_cls = ray.remote(DriverToolRelay)
        here = ray.get_runtime_context().get_node_id()
        self._relay = relay_cls.options(num_cpus=0, max_concurrency=10_000,
                                        scheduling_strategy=_on(ray, here, soft=True)).remote()
        if self._driver_tools:
            self._server = DriverToolServer(ray, self._relay, self.registry)
        for node, slots in zip(nodes, per_node, strict=True):
            self._slots.append(self._spawn(node["NodeID"], slots))
        try:
            infos = ray.get([s.actor.info.remote() for s in self._slots],
                            timeout=self._start_timeout)
        except ray.exceptions.RayError as exc:  # most often: execengine missing on a node
            raise BatchError(f"the execengine node workers did not start within "
                             f"{self._start_timeout:g}s: {type(exc).__name__}: {exc} "
                             "(every node needs execengine[ray] installed, see "
                             "docs/batch.md)") from exc
        for slot, info in zip(self._slots, infos, strict=True):
            slot.worker = info["worker"]

    def _spawn(self, node_id: str, slots: int) -> _Slot:
        actor = self.ray.remote(NodeWorker).options(
            num_cpus=0, max_concurrency=slots + self.prefetch + 4, max_restarts=0,
            max_task_retries=0,
            scheduling_strategy=_on(self.ray, node_id, soft=False),
        ).remote(self.config, slots, self._relay, self._driver_tools)
        return _Slot(actor=actor, node_id=node_id, slots=slots)

    def workers(self) -> list[dict[str, Any]]:
        """``info()`` of every live node worker (worker name, pid, slots, node id)."""
        live = [s for s in self._slots if s.alive]
        return list(self.ray.get([s.actor.info.remote() for s in live], timeout=60))

    # -- running --------------------------------------------------------------------------

    def run(self, tasks: Iterable[Task], *, stop: threading.Event | None = None
            ) -> Iterator[TaskOutcome]:
        ray = self.ray
        stop = stop or threading.Event()
        order = SessionOrder(tasks, hold=4 * self.concurrency)
        homes: dict[str, _Slot] = {}  # session -> the worker holding its interpreter
        flights: dict[Any, _Flight] = {}
        retries: collections.deque[_Retry] = collections.deque()
        while True:
            while not stop.is_set():
                slot = self._free_slot()
                if slot is None:
                    break
                if retries:
                    again = retries.popleft()
                    task, attempts, submitted = again.task, again.attempts, again.submitted
                else:
                    nxt = order.next()
                    if nxt is None:
                        break
                    task, attempts, submitted = nxt, 1, time.time()
                    if task.session is not None:
                        home = homes.setdefault(task.session, slot)
                        if not home.alive:
                            order.finished(task)
                            yield lost_outcome(task, home.worker, (
                                f"session {task.session!r} lived on {home.worker}, which "
                                "died; this task did not run"), attempts=0,
                                submitted=submitted)
                            continue
                        if home.inflight >= home.slots + self.prefetch:
                            order.put_back(task)  # its worker is full: wait for a slot there
                            break
                        slot = home
                ref = slot.actor.run.remote(task.to_wire(), submitted, attempts)
                slot.inflight += 1
                flights[ref] = _Flight(task, slot, submitted, attempts)
            if stop.is_set():
                yield from self._drain(flights)
                return
            if not flights:
                if order.drained and not retries:
                    return
                if self._free_slot() is None:
                    raise BatchError("every Ray node worker was lost and none can be "
                                     "replaced; rerun the same command to resume")
                continue
            ready, _ = ray.wait(list(flights), num_returns=1, timeout=POLL_SECONDS)
            for ref in ready:
                flight = flights.pop(ref)
                outcome = self._collect(ref, flight, retries)
                if outcome is not None:
                    order.finished(flight.task)
                    yield outcome

    def _collect(self, ref: Any, flight: _Flight, retries: collections.deque[_Retry]
                 ) -> TaskOutcome | None:
        ray = self.ray
        flight.slot.inflight -= 1
        task = flight.task
        try:
            payload = ray.get(ref)
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
                ray.exceptions.NodeDiedError, ray.exceptions.ObjectLostError) as exc:
            self._lost(flight.slot)
            # a session's state died with its worker: running the task elsewhere would run
            # it without what the earlier cells defined
            if task.retry_safe and task.session is None and flight.attempts <= self.retries:
                log.info("task %s: worker lost; running it again", task.id)
                retries.append(_Retry(task, flight.attempts + 1, flight.submitted))
                return None
            reason = f"{flight.slot.worker or 'a Ray worker'} died ({type(exc).__name__})"
            if task.session is not None:
                reason += f"; not retried: its session {task.session!r} died with it"
            elif not task.retry_safe:
                reason += "; not retried: the task is not marked retry_safe"
            return lost_outcome(task, flight.slot.worker, reason, attempts=flight.attempts,
                                submitted=flight.submitted)
        except ray.exceptions.RayError as exc:
            now = time.time()
            result = ExecutionResult("error", error=f"worker error: {type(exc).__name__}: "
                                                    f"{exc}")
            return TaskOutcome(id=task.id, line=task.line, result=result,
                               worker=flight.slot.worker, attempts=flight.attempts,
                               timings=Timings(flight.submitted, now, now), meta=task.meta,
                               task=task)
        return TaskOutcome(id=task.id, line=task.line,
                           result=ExecutionResult(**payload["result"]),
                           worker=payload["worker"], attempts=flight.attempts,
                           timings=Timings(flight.submitted, payload["started"],
                                           payload["finished"]),
                           meta=task.meta, task=task)

    def _drain(self, flights: dict[Any, _Flight]) -> Iterator[TaskOutcome]:
        """Stopping: interrupt every worker, yield what still finished, drop the rest."""
        ray = self.ray
        for slot in self._slots:
            if slot.alive:
                slot.actor.stop.remote()
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        while flights and time.monotonic() < deadline:
            ready, _ = ray.wait(list(flights), num_returns=len(flights),
                                timeout=min(POLL_SECONDS, deadline - time.monotonic()))
            for ref in ready:
                flight = flights.pop(ref)
                outcome = self._collect(ref, flight, collections.deque())
                if outcome is not None and outcome.status not in ("interrupted",
                                                                  "worker_lost"):
                    yield outcome
        for ref in flights:
            ray.cancel(ref, force=False)

    def _free_slot(self) -> _Slot | None:
        live = [s for s in self._slots if s.alive and s.inflight < s.slots + self.prefetch]
        return min(live, key=lambda s: s.inflight / s.slots) if live else None

    def _lost(self, slot: _Slot) -> None:
        """A node worker died: replace it if its node is alive and the budget allows."""
        if not slot.alive:
            return
        slot.alive = False
        log.warning("Ray node worker %s was lost", slot.worker)
        if self._closed or self._replacements_left <= 0:
            return
        alive = {n["NodeID"] for n in self.ray.nodes() if n.get("Alive")}
        if slot.node_id not in alive:
            return
        self._replacements_left -= 1
        fresh = self._spawn(slot.node_id, slot.slots)
        fresh.worker = f"{slot.worker} (replacement)"
        self._slots.append(fresh)

    # -- shutdown -------------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        ray = self.ray
        if self._server is not None:
            self._server.close()
        closing = []
        for slot in self._slots:
            if slot.alive:
                closing.append(slot.actor.close.remote())
        if closing:
            try:
                ray.wait(closing, num_returns=len(closing), timeout=60)
            except Exception:  # a dead worker cannot close: it is gone already
                log.debug("closing Ray node workers", exc_info=True)
        for slot in self._slots:
            ray.kill(slot.actor, no_restart=True)
        if self._relay is not None:
            ray.kill(self._relay, no_restart=True)
        self._slots.clear()
        if self._own_registry:
            self.registry.close()
        if self._own_ray:
            ray.shutdown()


def _on(ray: Any, node_id: str, *, soft: bool) -> Any:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=soft)
