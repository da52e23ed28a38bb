"""Figures for speed benchmarks: samples, their spread, and a ratio against a baseline
measured in the same run, interleaved with it.

Interleaving (A, B, A, B, ...) rather than all of A then all of B keeps a change in the
machine's load from landing on one side only: both sides see the same conditions.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Spread:
    """Summary of one measured quantity (in its unit)."""

    n: int
    min: float
    median: float
    p90: float
    p99: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> Spread:
        if not samples:
            raise ValueError("no samples")
        s = sorted(samples)
        return cls(len(s), s[0], statistics.median(s), _pct(s, 0.90), _pct(s, 0.99))

    def scaled(self, factor: float) -> Spread:
        return Spread(self.n, self.min * factor, self.median * factor, self.p90 * factor,
                      self.p99 * factor)


def _pct(s: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of sorted ``s``."""
    return s[max(0, math.ceil(q * len(s)) - 1)]


@dataclass(frozen=True)
class Figure:
    """One measured figure beside its baseline; ``ratio`` compares medians (value /
    baseline, so below 1 is faster for times and slower for rates: see ``higher_better``)."""

    name: str
    value: Spread
    baseline: Spread
    unit: str
    baseline_name: str
    higher_better: bool = False
    #: print p99 too (figures with a tail-latency target)
    show_p99: bool = False

    @property
    def ratio(self) -> float:
        return self.value.median / self.baseline.median if self.baseline.median else math.inf

    def line(self) -> str:
        v, b = self.value, self.baseline
        return (f"{self.name:40} {v.median:10.2f} {self.unit:7} ({self._tail(v)})  vs "
                f"{self.baseline_name} {b.median:.2f} ({self._tail(b)})  ratio "
                f"{self.ratio:.2f}x")

    def _tail(self, s: Spread) -> str:
        text = f"min {s.min:.2f}, p90 {s.p90:.2f}"
        return f"{text}, p99 {s.p99:.2f}" if self.show_p99 else text

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "unit": self.unit, "ratio": round(self.ratio, 3),
                "value": _spread_dict(self.value), "baseline_name": self.baseline_name,
                "baseline": _spread_dict(self.baseline), "higher_better": self.higher_better,
                "show_p99": self.show_p99}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Figure:
        """A figure from :meth:`to_dict` (one measured by another process)."""
        return cls(d["name"], Spread(**d["value"]), Spread(**d["baseline"]), d["unit"],
                   d["baseline_name"], bool(d.get("higher_better")), bool(d.get("show_p99")))


def _spread_dict(s: Spread) -> dict[str, float]:
    return {"n": s.n, "min": round(s.min, 4), "median": round(s.median, 4),
            "p90": round(s.p90, 4), "p99": round(s.p99, 4)}


def timed(fn: Callable[[], Any]) -> float:
    """Seconds one call of ``fn`` took."""
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def interleaved(reps: int, *fns: Callable[[], float]) -> list[list[float]]:
    """Call each of ``fns`` once per round, ``reps`` rounds, alternating the order of each
    round (A B, B A, ...) so neither side always runs first; one sample list per fn."""
    out: list[list[float]] = [[] for _ in fns]
    order = list(range(len(fns)))
    for rep in range(reps):
        for i in (order if rep % 2 == 0 else order[::-1]):
            out[i].append(fns[i]())
    return out
