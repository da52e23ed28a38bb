"""Progress while a batch runs, and the summary at its end.

:class:`Progress` draws one self-overwriting line (done/total, rate, ETA, failures) on a
terminal and nothing elsewhere; it redraws at most every ``interval`` seconds. :class:`Summary`
counts outcomes by status and keeps each task's run time for the percentiles.
"""

from __future__ import annotations

import math
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, TextIO

from execengine.batch.outcome import STATUSES, TaskOutcome


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass
class Summary:
    counts: Counter[str] = field(default_factory=Counter)
    run_seconds: list[float] = field(default_factory=list)
    #: tasks a resumed run found done already
    skipped: int = 0
    #: tasks stopped by Ctrl-C (not recorded: a rerun starts them again)
    stopped: bool = False
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None

    def add(self, outcome: TaskOutcome) -> None:
        self.counts[outcome.status] += 1
        if outcome.status not in ("invalid",):
            self.run_seconds.append(outcome.timings.run_seconds)

    @property
    def done(self) -> int:
        return sum(self.counts.values())

    @property
    def elapsed(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    @property
    def throughput(self) -> float:
        """Recorded tasks per second of this run."""
        return self.done / self.elapsed if self.elapsed > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"done": self.done, "skipped": self.skipped, "stopped": self.stopped,
                "counts": {s: self.counts[s] for s in (*STATUSES, *sorted(self.counts))
                           if self.counts[s]},
                "elapsed_seconds": round(self.elapsed, 3),
                "tasks_per_second": round(self.throughput, 3),
                "run_seconds_p50": round(percentile(self.run_seconds, 50), 4),
                "run_seconds_p99": round(percentile(self.run_seconds, 99), 4)}

    def text(self) -> str:
        d = self.to_dict()
        counts = ", ".join(f"{n} {s}" for s, n in d["counts"].items()) or "nothing run"
        lines = [f"{d['done']} task{'s' if d['done'] != 1 else ''} in "
                 f"{d['elapsed_seconds']:.1f}s ({d['tasks_per_second']:.2f}/s): {counts}"]
        if self.run_seconds:
            lines.append(f"run time p50 {d['run_seconds_p50']:.3f}s, "
                         f"p99 {d['run_seconds_p99']:.3f}s")
        if self.skipped:
            lines.append(f"{self.skipped} already in the results file (skipped)")
        if self.stopped:
            lines.append("stopped early: rerun the same command to run the rest")
        return "\n".join(lines)


class Progress:
    """A progress line on a terminal; silent when ``stream`` is not one."""

    def __init__(self, summary: Summary, *, total: int | None = None,
                 stream: TextIO | None = None, interval: float = 0.2,
                 enabled: bool | None = None) -> None:
        self.summary = summary
        self.total = total
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.interval = interval
        self._last = 0.0
        self._drawn = False

    def update(self, *, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        self.stream.write("\r" + self.line() + "\x1b[K")
        self.stream.flush()
        self._drawn = True

    def line(self, width: int = 24) -> str:
        s = self.summary
        done, rate = s.done, s.throughput
        failed = done - s.counts["success"]
        tail = f" {rate:.1f}/s" + (f" {failed} failed" if failed else "")
        if not self.total:
            return f"{done} done" + tail
        frac = min(1.0, done / self.total)
        filled = int(frac * width)
        bar = "#" * filled + "." * (width - filled)
        eta = (self.total - done) / rate if rate > 0 else math.inf
        eta_s = _duration(eta) if math.isfinite(eta) else "?"
        return f"[{bar}] {done}/{self.total} {frac:4.0%}{tail} ETA {eta_s}"

    def finish(self) -> None:
        if self.enabled and self._drawn:
            self.update(force=True)
            self.stream.write("\n")
            self.stream.flush()


def _duration(value: float) -> str:
    seconds = round(value)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
