"""Running the calls of one turn: in parallel only when that is safe.

A turn's calls run in parallel only when *every* call is safe to run alongside the others.
The rules come from the tools' declared policies (:class:`~execengine.policy.ToolPolicy`,
gathered by :meth:`ParallelPolicy.from_registry`):

* a tool that is not ``parallel_safe`` (terminal, execute_code, unknown names, a plugin's
  tool that declares nothing) forces sequential;
* parallel-safe tools that take a ``path`` are path-scoped (``read_file``, ``write_file``,
  ``patch``, and ``search_files`` over its ``path``, default ``.``): they run together only
  when no writer's (not ``read_only``) path overlaps another call's path. Paths are resolved
  (``~``, relative to the working directory, symlinks); a directory overlaps everything
  below it. A path-scoped call whose path cannot be known (no path, or ``mode="patch"``: a
  multi-file diff names its own files) forces sequential;
* other read-only parallel-safe tools (``web_search``) run together freely; a parallel-safe
  tool with side effects and no path cannot be checked and forces sequential.

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
from typing import TYPE_CHECKING, Any

from execengine.registry import error_result

if TYPE_CHECKING:
    from execengine.registry import ToolRegistry

PATH_ARGUMENT = "path"


@dataclass(frozen=True)
class ParallelPolicy:
    """Which tools may run concurrently. Built from the registry's declared tool policies
    (:meth:`from_registry`); the empty default runs every batch sequentially."""

    #: tools that never run alongside others, whatever else says so
    never_parallel: frozenset[str] = frozenset()
    #: tools free to run together (no path to check)
    parallel_safe: frozenset[str] = frozenset()
    #: tool -> True when the call writes to its path
    path_scoped: Mapping[str, bool] = field(default_factory=dict)
    #: tool -> the path a call without one covers (``search_files``: ``"."``)
    path_defaults: Mapping[str, str] = field(default_factory=dict)
    #: argument holding the path of a path-scoped tool
    path_argument: str = PATH_ARGUMENT

    @classmethod
    def from_registry(cls, registry: ToolRegistry) -> ParallelPolicy:
        """The batching rules the registered tools declare (see the module docstring)."""
        free: set[str] = set()
        scoped: dict[str, bool] = {}
        defaults: dict[str, str] = {}
        for entry in registry.entries():
            policy = entry.policy
            if not policy.parallel_safe:
                continue
            props = entry.parameters.get("properties") or {}
            if PATH_ARGUMENT in props:
                scoped[entry.name] = not policy.read_only
                default = props[PATH_ARGUMENT].get("default")
                if isinstance(default, str) and default:
                    defaults[entry.name] = default
            elif policy.read_only:
                free.add(entry.name)
        return cls(parallel_safe=frozenset(free), path_scoped=scoped, path_defaults=defaults)


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
    if args.get("mode") == "patch":
        return None  # a multi-file diff names its own files
    if raw is None:
        return policy.path_defaults.get(name)
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
