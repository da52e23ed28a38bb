"""Running the calls of one turn: in parallel only when that is safe.

A turn's calls run in parallel only when *every* call is safe to run alongside the others:

* a tool in the never-parallel set (interactive tools such as ``clarify``) forces sequential;
* read-only tools in the parallel-safe set may run together;
* path-scoped tools (``read_file``, ``write_file``, ``patch``, and ``search_files`` over its
  ``path``) may run together only when no writer's path overlaps another call's path. Paths
  are resolved (``~``, relative to the working directory, symlinks); a directory overlaps
  everything below it. A path-scoped call whose path cannot be known (``patch`` in
  multi-file mode) forces sequential;
* any other tool (terminal, execute_code, unknown plugins) forces sequential.

Parallel batches run in a bounded thread pool with a deadline for the whole batch; a call
still running at the deadline gets a timeout result (its thread cannot be killed and
finishes in the background; its late result is discarded). Results always come back in the
order of the calls.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from execengine.dispatch import error_result

NEVER_PARALLEL = frozenset({"clarify", "ask_user", "send_message", "execute_code"})
PARALLEL_SAFE = frozenset({
    "read_file", "search_files", "web_search", "web_extract", "session_search",
    "vision_analyze", "process_status",
})
#: tool -> True when the call writes to its path
PATH_SCOPED: Mapping[str, bool] = {
    "read_file": False, "search_files": False, "write_file": True, "patch": True,
}


@dataclass(frozen=True)
class ParallelPolicy:
    """Which tools may run concurrently; hosts extend it for their own tools."""

    never_parallel: frozenset[str] = NEVER_PARALLEL
    parallel_safe: frozenset[str] = PARALLEL_SAFE
    path_scoped: Mapping[str, bool] = field(default_factory=lambda: dict(PATH_SCOPED))
    #: argument holding the path of a path-scoped tool
    path_argument: str = "path"


@dataclass(frozen=True)
class BatchPlan:
    parallel: bool
    reason: str


def _resolve(path: str, cwd: str | None) -> Path:
    p = Path(os.path.expanduser(path))
    if not p.is_absolute():
        p = Path(cwd or os.getcwd()) / p
    return Path(os.path.realpath(p))


def paths_overlap(a: Path, b: Path) -> bool:
    """Same path, or one is a directory containing the other."""
    return a == b or a in b.parents or b in a.parents


def _scope(name: str, args: Mapping[str, Any], policy: ParallelPolicy) -> str | None:
    raw = args.get(policy.path_argument)
    if name == "search_files" and raw is None:
        return "."
    if name == "patch" and args.get("mode") == "patch":
        return None
    return raw if isinstance(raw, str) and raw else None


def plan_batch(
    calls: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    policy: ParallelPolicy | None = None,
    cwd: str | None = None,
) -> BatchPlan:
    """Decide how ``calls`` (``(tool, args)`` pairs) run; see the module docstring."""
    policy = policy or ParallelPolicy()
    if len(calls) < 2:
        return BatchPlan(False, "single call")
    scoped: list[tuple[str, Path, bool]] = []
    for name, args in calls:
        if name in policy.never_parallel:
            return BatchPlan(False, f"{name} never runs in parallel")
        if name in policy.path_scoped:
            raw = _scope(name, args, policy)
            if raw is None:
                return BatchPlan(False, f"{name} call has no single path")
            scoped.append((name, _resolve(raw, cwd), policy.path_scoped[name]))
        elif name not in policy.parallel_safe:
            return BatchPlan(False, f"{name} is not known to be parallel-safe")
    for i, (n1, p1, w1) in enumerate(scoped):
        for n2, p2, w2 in scoped[i + 1:]:
            if (w1 or w2) and paths_overlap(p1, p2):
                return BatchPlan(False, f"{n1} {p1} overlaps {n2} {p2}")
    return BatchPlan(True, "all calls parallel-safe")


@dataclass(frozen=True)
class BatchResult:
    """Result texts in call order; ``timed_out`` holds the indexes cut by the deadline."""

    results: list[str]
    timed_out: frozenset[int] = frozenset()


def run_sequential(jobs: Sequence[Callable[[], str]]) -> BatchResult:
    return BatchResult([job() for job in jobs])


def run_parallel(
    jobs: Sequence[Callable[[], str]],
    *,
    max_workers: int,
    timeout: float,
    names: Sequence[str] | None = None,
) -> BatchResult:
    """Run ``jobs`` in a pool of ``max_workers``; results in order, timeouts as results."""
    if not jobs:
        return BatchResult([])
    labels = list(names) if names is not None else ["tool"] * len(jobs)
    pool = ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(jobs))),
                              thread_name_prefix="execengine-tool")
    try:
        futures = [pool.submit(job) for job in jobs]
        done, _ = wait(futures, timeout=timeout)
        out: list[str] = []
        late: set[int] = set()
        for i, (fut, name) in enumerate(zip(futures, labels, strict=True)):
            if fut in done:
                try:
                    out.append(fut.result())
                except Exception as exc:  # jobs are meant not to raise; stay safe
                    out.append(error_result(f"Tool execution failed: {type(exc).__name__}: "
                                            f"{exc}"))
                continue
            started = not fut.cancel()
            late.add(i)
            out.append(error_result(
                f"Tool {name!r} timed out: the batch limit of {timeout:g}s was reached "
                f"{'while it was running' if started else 'before it started'}; "
                "it was not waited for and its result is discarded."
            ))
        return BatchResult(out, frozenset(late))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
