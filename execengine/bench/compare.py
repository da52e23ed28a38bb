"""Which figures face each other, and the statistics over tasks.

Per workflow (a row of the report, :func:`row`) every strategy's every way is kept with its
requests; what is compared is chosen here, under a :class:`Billing` (price sheet, cache,
reasoning tokens per call):

- ``best`` (the headline): the cheapest sequential plan (batched calls) against the cheapest
  script, each the cheapest of the workflow's strategies as billed;
- ``matched`` (ablation): the naive plan against the script making the same calls;
- ``serial`` (ablation, worst case): the naive plan one call per message against that script.

Near-duplicate workflows (one ``cluster``) make one *task*, whose figures are its members'
means. Statistics are over tasks: the median of the per-task savings first, with a 95 %
percentile bootstrap interval over tasks (it measures how the figure depends on the task mix;
the oracle has no run-to-run variance: two runs count the same tokens), then totals (sums of
the tasks' figures) and their saving.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from execengine.bench.cost import PriceSheet, bill
from execengine.bench.workflow import NAIVE
from execengine.errors import BenchError

if TYPE_CHECKING:
    from execengine.bench.runner import Figures, WorkflowResult

METRICS = ("cost", "context_tokens", "input_tokens", "round_trips")
COMPARISONS = ("best", "matched", "serial")
BOOTSTRAP = 2000
#: reasoning tokens per model call the sweep prices
SWEEP = (0, 250, 500, 1000, 2000)


@dataclass(frozen=True)
class Billing:
    sheet: PriceSheet
    cache: str = "warm"
    #: hidden reasoning tokens per model call (None: the sheet's default)
    reasoning: int | None = None

    @property
    def reasoning_tokens(self) -> int:
        return self.sheet.reasoning_tokens if self.reasoning is None else self.reasoning

    def dollars(self, fig: Mapping[str, Any]) -> float:
        return bill(fig["requests"], self.sheet, prefix_tokens=fig["prefix_tokens"],
                    cache=self.cache, reasoning=self.reasoning_tokens).dollars


def _figures(f: Figures) -> dict[str, Any]:
    return {"context_tokens": f.context_tokens, "input_tokens": f.input_tokens,
            "output_tokens": f.output_tokens, "round_trips": f.round_trips,
            "tool_definition_tokens": f.tool_tokens, "prefix_tokens": f.prefix_tokens,
            "requests": [list(r) for r in f.requests]}


def row(result: WorkflowResult) -> dict[str, Any]:
    """One workflow: every strategy, every way, every prefix, as JSON-able data."""
    strategies = {}
    for name, s in result.strategies.items():
        strategies[name] = {
            "agree": s.agree, "correct": dict(s.correct), "same_calls": s.same_calls,
            "detail": s.detail, "tool_calls": s.ways["batched"].tool_calls,
            "script_tool_calls": s.ways["programmatic"].inner_tool_calls,
            "ways": {w: {p: _figures(f) for p, f in way.figures.items()}
                     for w, way in s.ways.items()}}
    return {"workflow": result.name, "family": result.family,
            "cluster": result.cluster or result.name, "agree": result.agree,
            "checked": bool(result.correct), "detail": result.detail,
            "strategies": strategies}


def pair(r: Mapping[str, Any], comparison: str, prefix: str, billing: Billing
         ) -> tuple[tuple[str, Mapping[str, Any]], tuple[str, Mapping[str, Any]]]:
    """(strategy, figures) of the baseline and of the programmatic way. ``best`` picks among
    the strategies that were right (all of them when none was: the row is wrong anyway)."""
    strategies = r["strategies"]
    if comparison == "best":
        right = [s for s in strategies if strategies[s]["agree"]] or list(strategies)

        def cheapest(way: str) -> tuple[str, Mapping[str, Any]]:
            name = min(right, key=lambda s: billing.dollars(
                strategies[s]["ways"][way][prefix]))  # ties: the first (naive)
            return name, strategies[name]["ways"][way][prefix]
        return cheapest("batched"), cheapest("programmatic")
    if comparison not in COMPARISONS:
        raise BenchError(f"unknown comparison {comparison!r}; one of {', '.join(COMPARISONS)}")
    ways = strategies[NAIVE]["ways"]
    base = "serial" if comparison == "serial" else "batched"
    return (NAIVE, ways[base][prefix]), (NAIVE, ways["programmatic"][prefix])


def metric(fig: Mapping[str, Any], name: str, billing: Billing) -> float:
    return billing.dollars(fig) if name == "cost" else float(fig[name])


def saving(base: float, prog: float) -> float:
    return 0.0 if base <= 0 else 1 - prog / base


@dataclass(frozen=True)
class Task:
    """A cluster of workflows, counted once: the means of its members' figures."""

    name: str
    family: str
    workflows: tuple[str, ...]
    #: metric -> (baseline, programmatic)
    values: Mapping[str, tuple[float, float]]
    #: the strategies the baseline and the programmatic way chose, per member
    chosen: tuple[tuple[str, str], ...]

    def saving(self, name: str) -> float:
        return saving(*self.values[name])


def tasks(rows: Sequence[Mapping[str, Any]], comparison: str, prefix: str, billing: Billing,
          metrics: Sequence[str] = METRICS) -> list[Task]:
    """The rows grouped by cluster (in first-seen order), each metric averaged."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(r["cluster"], []).append(r)
    out = []
    for name, members in groups.items():
        pairs = [pair(r, comparison, prefix, billing) for r in members]
        values = {m: (statistics.fmean(metric(b[1], m, billing) for b, _ in pairs),
                      statistics.fmean(metric(p[1], m, billing) for _, p in pairs))
                  for m in metrics}
        out.append(Task(name, members[0]["family"], tuple(r["workflow"] for r in members),
                        values, tuple((b[0], p[0]) for b, p in pairs)))
    return out


def interval(items: Sequence[Any], stat: Callable[[Sequence[Any]], float], *,
             resamples: int = BOOTSTRAP, seed: int = 0) -> tuple[float, float]:
    """95 % percentile bootstrap interval of ``stat`` over ``items`` resampled with
    replacement (a fixed seed: the same items give the same interval)."""
    if len(items) < 2:
        v = stat(items) if items else 0.0
        return v, v
    rng = random.Random(seed)
    n = len(items)
    got = sorted(stat([items[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    return got[int(0.025 * resamples)], got[min(resamples - 1, int(0.975 * resamples))]


def _median_saving(ts: Sequence[Task], name: str) -> float:
    return statistics.median(t.saving(name) for t in ts) if ts else 0.0


def _total_saving(ts: Sequence[Task], name: str) -> float:
    return saving(sum(t.values[name][0] for t in ts), sum(t.values[name][1] for t in ts))


def stats(ts: Sequence[Task], name: str, *, intervals: bool = True) -> dict[str, Any]:
    """Medians over tasks first (of the saving, and of each side per task), totals second."""
    digits = 6 if name == "cost" else 1
    base = [t.values[name][0] for t in ts]
    prog = [t.values[name][1] for t in ts]
    out: dict[str, Any] = {
        "tasks": len(ts),
        "median_saving": round(_median_saving(ts, name), 4),
        "median_baseline": round(statistics.median(base), digits) if ts else 0.0,
        "median_programmatic": round(statistics.median(prog), digits) if ts else 0.0,
        "median_saved": (round(statistics.median(b - p for b, p in zip(base, prog,
                                                                         strict=True)), digits)
                         if ts else 0.0),
        "total_baseline": round(sum(base), digits),
        "total_programmatic": round(sum(prog), digits),
        "total_saved": round(sum(base) - sum(prog), digits),
        "total_saving": round(_total_saving(ts, name), 4),
    }
    if intervals:
        lo, hi = interval(ts, lambda s: _median_saving(s, name))
        out["median_saving_ci95"] = [round(lo, 4), round(hi, 4)]
        lo, hi = interval(ts, lambda s: _total_saving(s, name))
        out["total_saving_ci95"] = [round(lo, 4), round(hi, 4)]
    return out


def by_family(ts: Sequence[Task], names: Sequence[str] = ("cost", "context_tokens")
              ) -> dict[str, Any]:
    families = sorted({t.family for t in ts})
    return {f: {m: stats([t for t in ts if t.family == f], m) for m in names}
            for f in families}
