"""Speed benchmarks: throughput and scaling, each beside a baseline from the same run.

- **throughput**: trivial executions per second with 1, 2, 4 and 8 running at once (the
  engine's default launcher), against
  bare interpreter spawns (``python -c pass``) at the same concurrency;
- **tool-call scaling**: a script making 10, 100, 1000 ``read_file`` calls (budget raised):
  wall time, per-call cost and the host's memory growth, against the same calls dispatched
  in-process (what the calls cost without the sandbox boundary);
- **output scaling**: scripts printing 1 KB to 100 MB (the engine keeps its capped head and
  tail), against a bare interpreter printing the same bytes into a pipe.

Full mode reports the median of three runs for times (``--quick``: one run). Benchmarks
print figures; they are not tests and assert nothing about speed.
``run_all`` also runs ``benchmarks/bench_engine.py`` and ``benchmarks/bench_isolation.py``
when the source tree is there.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from execengine.config import Config, load_config
from execengine.engine.core import Engine
from execengine.registry import ToolRegistry


@dataclass(frozen=True)
class Figure:
    """One measured figure beside its baseline (lower is better unless ``higher_better``)."""

    name: str
    value: float
    baseline: float
    unit: str
    baseline_name: str
    higher_better: bool = False

    @property
    def ratio(self) -> float:
        return self.value / self.baseline if self.baseline else float("inf")

    def line(self) -> str:
        return (f"{self.name:44} {self.value:12.2f} {self.unit:8} vs {self.baseline_name} "
                f"{self.baseline:10.2f}  ratio {self.ratio:6.2f}x")


def make_engine(config: Config, root: str) -> Any:

    cfg = config.with_overrides({"terminal.cwd": root, "code_execution.max_tool_calls": 5000,
                                 "code_execution.timeout": 300.0})
    return Engine(cfg, ToolRegistry.with_builtins(cfg, plugins=False))


def _timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    """Seconds ``fn(*args, **kwargs)`` took, and what it returned."""
    t = time.perf_counter()
    value = fn(*args, **kwargs)
    return time.perf_counter() - t, value


def _median_timed(reps: int, fn: Callable[..., Any], *args: Any,
                  **kwargs: Any) -> tuple[float, Any]:
    """The median time of ``reps`` runs, and the last run's value."""
    runs = [_timed(fn, *args, **kwargs) for _ in range(reps)]
    return statistics.median(t for t, _ in runs), runs[-1][1]


def _execute(engine: Any, code: str, tools: list[str]) -> Any:
    """Run ``code``; drop the spill file holding a truncated run's full output."""
    res = engine.execute(code, tools=tools)
    if res.full_output_path:
        Path(res.full_output_path).unlink(missing_ok=True)
    return res


def _dispatch_n(registry: Any, n: int, root: str) -> None:
    for _ in range(n):
        registry.dispatch("read_file", {"path": "small.txt"}, cwd=root)


def _rate(count: int, workers: int, job: Callable[[], Any]) -> float:
    """Jobs per second running ``count`` jobs on ``workers`` threads."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        started = time.perf_counter()
        for f in [pool.submit(job) for _ in range(count)]:
            f.result()
        return count / (time.perf_counter() - started)


def throughput(engine: Any, *, quick: bool) -> list[Figure]:
    count = 8 if quick else 32
    bare = [sys.executable, "-c", "pass"]
    out = []
    engine.execute("pass")  # warm up: RPC server, stub rendering caches
    for workers in (1, 2, 4, 8):
        base = _rate(count, workers, lambda: subprocess.run(bare, check=True))

        def job() -> None:
            result = engine.execute("pass", tools=[])
            if result.status != "success":
                raise RuntimeError(f"trivial execution failed: {result.error}")

        value = _rate(count, workers, job)
        out.append(Figure(f"throughput, {workers} at once", value, base, "exec/s",
                          "python -c pass", higher_better=True))
    return out


@contextmanager
def _peak_rss() -> Iterator[list[int]]:
    """Yields a one-item list that holds the peak RSS growth (bytes) of this process."""

    proc = psutil.Process()
    start = proc.memory_info().rss
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss - start)
            done.wait(0.01)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        yield peak
    finally:
        done.set()
        t.join()
        peak[0] = max(peak[0], proc.memory_info().rss - start)


def tool_call_scaling(engine: Any, root: str, *, quick: bool) -> list[Figure]:
    Path(root, "small.txt").write_text("hello\n" * 20)
    out = []
    for n in ((10, 100) if quick else (10, 100, 1000)):
        code = ("from hermes_tools import read_file\n"
                f"for _ in range({n}):\n    read_file('small.txt')\nprint('done')\n")
        reps = 1 if quick else 3
        with _peak_rss() as peak:
            seconds, res = _median_timed(reps, _execute, engine, code, ["read_file"])
        if res.status != "success" or res.tool_calls_made != n:
            raise RuntimeError(f"scaling script failed: {res.error}")
        base, _ = _median_timed(reps, _dispatch_n, engine.registry, n, root)
        out.append(Figure(f"{n} tool calls, whole execution", seconds * 1000, base * 1000,
                          "ms", "in-process"))
        out.append(Figure(f"{n} tool calls, host memory growth", peak[0] / 2**20,
                          _baseline_mb(), "MiB", "interpreter RSS"))
    return out


def _baseline_mb() -> float:
    """Resident memory of a bare interpreter, the yardstick for memory figures."""

    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)
    try:
        time.sleep(0.05)
        return float(psutil.Process(proc.pid).memory_info().rss) / 2**20
    finally:
        proc.communicate(b"")


def output_scaling(engine: Any, *, quick: bool) -> list[Figure]:
    sizes = (1 << 10, 1 << 20, 10 << 20) if quick else (1 << 10, 1 << 20, 10 << 20, 100 << 20)
    out = []
    for size in sizes:
        code = (f"import sys\nchunk = 'x' * 65536\nn = {size}\n"
                "while n > 0:\n    sys.stdout.write(chunk[:min(n, 65536)])\n"
                "    n -= 65536\n")
        reps = 1 if quick else 3
        with _peak_rss() as peak:
            seconds, res = _median_timed(reps, _execute, engine, code, [])
        if res.status != "success":
            raise RuntimeError(f"output script failed: {res.error}")
        base, _ = _median_timed(reps, subprocess.run, [sys.executable, "-c", code],
                                check=True, capture_output=True)
        label = _size(size)
        out.append(Figure(f"output {label}, whole execution", seconds * 1000, base * 1000,
                          "ms", "bare pipe"))
        out.append(Figure(f"output {label}, host memory growth", peak[0] / 2**20,
                          size / 2**20, "MiB", "output size"))
    return out


def _size(n: int) -> str:
    return f"{n >> 20} MB" if n >= 1 << 20 else f"{n >> 10} KB"


def run_builtin(*, quick: bool, config: Config | None = None,
                emit: Callable[[str], None] = print) -> list[Figure]:
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="execengine-speed-") as root, \
            make_engine(config or Config(), root) as engine:
        try:
            for title, fn in (("throughput", lambda: throughput(engine, quick=quick)),
                              ("tool-call scaling",
                               lambda: tool_call_scaling(engine, root, quick=quick)),
                              ("output scaling", lambda: output_scaling(engine, quick=quick))):
                emit(f"== {title}")
                for fig in fn():
                    figures.append(fig)
                    emit(fig.line())
        finally:
            engine.registry.close()
    return figures


EXTERNAL = ("bench_engine.py", "bench_isolation.py")


def benchmarks_dir() -> Path | None:
    here = Path(__file__).resolve().parents[2] / "benchmarks"
    return here if here.is_dir() else None


def _quick_args(script: Path) -> list[str]:
    """``--quick`` when the script takes it, else fewer ``--runs`` when it takes that."""
    try:
        usage = subprocess.run([sys.executable, str(script), "--help"], capture_output=True,
                               text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    if "--quick" in usage:
        return ["--quick"]
    return ["--runs", "5"] if "--runs" in usage else []


def run_all(*, quick: bool, config_path: str | None = None) -> int:
    """Everything ``execengine bench speed`` runs; returns an exit status."""
    started = time.perf_counter()
    config = load_config(config_path) if config_path else Config()
    mode = "quick" if quick else "full"
    print(f"execengine speed benchmarks ({mode}); ratios are against baselines measured now")
    run_builtin(quick=quick, config=config)
    status = 0
    where = benchmarks_dir()
    for name in EXTERNAL:
        script = where / name if where else None
        if script is None or not script.is_file():
            print(f"== {name}: not present here (it ships with the source tree)")
            continue
        print(f"== {name}", flush=True)
        argv = [sys.executable, str(script), *(_quick_args(script) if quick else [])]
        env = dict(os.environ)
        if config_path:
            env["EXECENGINE_CONFIG"] = config_path
        rc = subprocess.run(argv, env=env, timeout=600 if not quick else 120).returncode
        if rc:
            print(f"{name} exited with status {rc}")
            status = 1
    print(f"total {time.perf_counter() - started:.1f}s")
    return status
