"""Load: many concurrent executions, each making many tool calls, on one engine.

Every execution calls ``load_echo(i=..., tag=...)`` serially; the tool answers with what it
got, so a reply delivered to the wrong execution (or call) is seen by the script. Counted:

* **lost**: an execution that did not finish with its summary (a call never answered
  makes the script hang until its timeout);
* **misrouted**: a reply with another execution's tag or another call's index;
* **refused**: a call answered with an error (for instance "all host worker threads busy");
* **leaked**, after the engine closed, beyond what was there before: host file descriptors,
  threads, tagged temp directories, cgroups; and quarantined uid slots.

Used by ``benchmarks/bench_load.py`` (full size) and ``tests/engine/test_engine_load.py``.
"""

from __future__ import annotations

import json
import os
import secrets
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from execengine.config import Config
from execengine.engine import Engine
from execengine.hostdirs import owner_tag
from execengine.isolation import cgroups
from execengine.policy import ToolPolicy
from execengine.registry import ToolRegistry

SCHEMA = {"description": "Echo for load tests.", "parameters": {
    "type": "object", "properties": {"i": {"type": "integer"}, "tag": {"type": "string"}},
    "required": ["i", "tag"]}}

SCRIPT = """\
import json
from hermes_tools import load_echo
ok = bad = err = 0
for i in range({calls}):
    r = load_echo(i=i, tag={tag!r})
    if isinstance(r, dict) and r.get("error"):
        err += 1
    elif r == {{"i": i, "tag": {tag!r}}}:
        ok += 1
    else:
        bad += 1
print(json.dumps({{"ok": ok, "bad": bad, "err": err}}))
"""


@dataclass(frozen=True)
class LoadReport:
    level: str
    executions: int
    calls_per_execution: int
    seconds: float
    calls_ok: int
    lost: int
    misrouted: int
    refused: int
    leaked_fds: int
    leaked_threads: int
    leaked_dirs: int
    leaked_cgroups: int
    quarantined_slots: int
    execution_p50_s: float
    execution_p99_s: float

    @property
    def clean(self) -> bool:
        return not (self.lost or self.misrouted or self.refused or self.leaked_fds
                    or self.leaked_threads or self.leaked_dirs or self.leaked_cgroups
                    or self.quarantined_slots)

    def line(self) -> str:
        calls = self.executions * self.calls_per_execution
        return (f"{self.level:<10} {self.executions:>4} executions x {self.calls_per_execution}"
                f" calls: {self.calls_ok}/{calls} ok in {self.seconds:.1f} s "
                f"({self.calls_ok / self.seconds:.0f} calls/s); lost {self.lost}, misrouted "
                f"{self.misrouted}, refused {self.refused}; leaked fds {self.leaked_fds}, "
                f"threads {self.leaked_threads}, dirs {self.leaked_dirs}, cgroups "
                f"{self.leaked_cgroups}, quarantined uid slots {self.quarantined_slots}; "
                f"execution p50 {self.execution_p50_s:.2f} s, p99 {self.execution_p99_s:.2f} s")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def registry(config: Config) -> ToolRegistry:
    reg = ToolRegistry(config)
    reg.register("load_echo", "load", SCHEMA, lambda args, ctx: {"i": args.get("i"),
                                                                 "tag": args.get("tag")},
                 policy=ToolPolicy(script_callable=True))
    return reg


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _tagged_dirs() -> int:
    tag = owner_tag() + "-"
    n = 0
    for root in dict.fromkeys((tempfile.gettempdir(), "/tmp")):
        try:
            n += sum(1 for name in os.listdir(root)
                     if name.startswith("execengine-") and tag in name)
        except OSError:
            continue
    return n


def _cgroups() -> int:
    try:
        layout = cgroups.discover()
    except OSError:
        return 0
    tag = cgroups.PREFIX + owner_tag() + "-"
    parents = [p for p in (layout.v2_parent, *(d for _, d in layout.v1_parents)) if p]
    n = 0
    for parent in parents:
        try:
            n += sum(1 for name in os.listdir(parent) if name.startswith(tag))
        except OSError:
            continue
    return n


def run(level: str, executions: int, calls: int, *, timeout: float = 300.0) -> LoadReport:
    """Run ``executions`` scripts at once at isolation ``level`` (``auto``, ``none``, ...),
    each making ``calls`` tool calls, and report (see the module docstring)."""
    config = Config().with_overrides({
        "code_execution.isolation": level, "code_execution.mode": "strict",
        "code_execution.timeout": timeout, "code_execution.hello_timeout": timeout,
        "code_execution.max_tool_calls": calls + 10})
    # what is there before (other engines of this process, their warm entries' cgroups)
    fds, threads, dirs, groups = _fds(), threading.active_count(), _tagged_dirs(), _cgroups()
    durations: list[float] = []
    lost = misrouted = refused = ok = 0
    quarantined = 0
    reg = registry(config)
    started = time.monotonic()
    with reg, Engine(config=config, registry=reg) as engine:
        chosen = getattr(engine.launcher, "level", level)

        def one(_: int) -> tuple[dict[str, Any] | None, float]:
            t0 = time.monotonic()
            result = engine.execute(SCRIPT.format(calls=calls, tag=secrets.token_hex(8)),
                                    enabled_toolsets=["load"])
            took = time.monotonic() - t0
            try:
                return json.loads(result.output.strip().splitlines()[-1]), took
            except (ValueError, IndexError):
                return None, took

        with ThreadPoolExecutor(max_workers=executions) as pool:
            for summary, took in pool.map(one, range(executions)):
                durations.append(took)
                if summary is None:
                    lost += 1
                    continue
                ok += summary["ok"]
                misrouted += summary["bad"]
                refused += summary["err"]
        seconds = time.monotonic() - started
        quarantined = len(getattr(engine.launcher, "_quarantined", ()))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (
            _fds() > fds or threading.active_count() > threads or _tagged_dirs() > dirs
            or _cgroups() > groups):
        time.sleep(0.05)
    durations.sort()
    return LoadReport(
        level=chosen, executions=executions, calls_per_execution=calls, seconds=seconds,
        calls_ok=ok, lost=lost, misrouted=misrouted, refused=refused,
        leaked_fds=max(0, _fds() - fds), leaked_threads=max(0, threading.active_count()
                                                              - threads),
        leaked_dirs=max(0, _tagged_dirs() - dirs), leaked_cgroups=max(0, _cgroups() - groups),
        quarantined_slots=quarantined,
        execution_p50_s=statistics.median(durations),
        execution_p99_s=durations[min(len(durations) - 1, int(len(durations) * 0.99))])
