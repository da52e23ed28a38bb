"""Waiting until what an execution left to the background is done.

After a one-shot execution the launcher works on in the background: at ``none`` it starts
the next script's interpreter (``code_execution.warm_entries`` of them, about 27 ms of CPU
each), at the sandboxed levels it removes what the child left (its cgroup, its private
``/tmp``) and prepares the next launch. A figure measured meanwhile shares the CPUs with
that work: wait first, so each figure is the execution's own.
"""

from __future__ import annotations

import time

import psutil

from execengine import Engine

#: how long the host and its descendants must use no CPU (beyond one clock tick, the
#: measuring's own) to count as settled
WINDOW = 0.05


def settled(engine: Engine, timeout: float = 10.0) -> None:
    """Return once ``engine``'s launcher has its interpreters started ahead (at ``none``)
    and this process and every process it started are idle for :data:`WINDOW`."""
    prestarted = getattr(engine.launcher, "prestarted", None)
    want = engine.config.code_execution.warm_entries
    deadline = time.monotonic() + timeout
    while True:
        pids = prestarted() if prestarted is not None else []
        if (prestarted is None or len(pids) >= want) and _idle(pids):
            return
        if time.monotonic() > deadline:
            raise SystemExit("the engine's background work did not settle in time")
        time.sleep(0.005)


def _idle(pids: list[int]) -> bool:
    """Whether this process, its descendants and ``pids`` (the interpreters started ahead:
    not always descendants) use no CPU for :data:`WINDOW`."""
    before = _cpu(pids)
    time.sleep(WINDOW)
    return _cpu(pids) - before <= 0.011


def _cpu(pids: list[int]) -> float:
    host = psutil.Process()
    procs = {p.pid: p for p in host.children(recursive=True)}
    for pid in pids:
        if pid not in procs:
            try:
                procs[pid] = psutil.Process(pid)
            except psutil.NoSuchProcess:
                continue
    total = 0.0
    for proc in [host, *procs.values()]:
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total
