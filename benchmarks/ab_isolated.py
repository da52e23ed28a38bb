"""Compare ``isolated`` executions of two (or more) source trees, interleaved in one run.

    python benchmarks/ab_isolated.py OLD_TREE NEW_TREE [--rounds 8] [--python PYTHON]

Each tree (a checkout: ``git worktree add /tmp/old <commit>``) gets one host process, run by
``--python`` (default: this interpreter; give the reference's to match the fair suite),
with a no-op engine at ``isolated`` whose scripts start that same interpreter. Each round
asks every tree in turn (the order alternating round by round, so load from elsewhere hits
all alike) for:

* ``cpu``: ``--per-round`` ``print("hi")`` one after another, each one's wall time, and
  their CPU time per execution (host, spawner, template and every descendant, until they
  have settled after the last one: the entries prepared ahead count, as in ``bench
  speed``);
* ``rate``: 16 trivial executions on 4 callers, executions per second, and the CPU the
  tree's processes used per execution meanwhile;
* ``rt``: a script's 200 no-op tool round trips.

Prints each tree's medians (and min, p90) and each tree's ratio to the first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

_WORKER = r"""
import json, sys, time
from concurrent.futures import ThreadPoolExecutor
from execengine.bench.speed import ROUND_TRIPS, _checked, _settled, cpu_seconds, noop_engine
from execengine.bench.stats import timed as _timed
from execengine.config import Config
import tempfile
cfg = {"code_execution.python": sys.executable}
with tempfile.TemporaryDirectory() as cwd, noop_engine(Config(), "isolated", **cfg) as engine:
    def hi():
        _checked(engine.execute('print("hi")', mode="project", cwd=cwd), "hi")
    def trivial():
        _checked(engine.execute("pass", tools=[]), "trivial")
    for _ in range(5):
        hi()
    print(json.dumps({"level": engine.launcher.level}), flush=True)
    for line in sys.stdin:
        kind, n = line.split()
        n = int(n)
        if kind == "cpu":
            _settled()
            c = cpu_seconds()
            walls = [_timed(hi) for _ in range(n)]
            out = [walls, (_settled() - c) / n]
        elif kind == "rate":
            _settled()
            c, t = cpu_seconds(), time.perf_counter()
            with ThreadPoolExecutor(4) as pool:
                for f in [pool.submit(trivial) for _ in range(n)]:
                    f.result()
            wall = time.perf_counter() - t
            out = [n / wall, (_settled() - c) / n]
        else:
            r = _checked(engine.execute(ROUND_TRIPS.format(n=n)), "round trips")
            out = json.loads(r.output)
        print(json.dumps(out), flush=True)
"""


def _q(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _line(name: str, xs: list[float], unit: str, first: list[float] | None) -> str:
    med = statistics.median(xs)
    ratio = f"  {med / statistics.median(first):.2f}x the first" if first else ""
    return (f"  {name:34} {med:9.2f} {unit:6} (min {min(xs):.2f}, p90 {_q(xs, .9):.2f}, "
            f"n={len(xs)}){ratio}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--per-round", type=int, default=10)
    ap.add_argument("--skip", default="", help="comma-separated: cpu, rate, rt")
    opts = ap.parse_args()
    skip = set(filter(None, opts.skip.split(",")))
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    procs = []
    for tree in opts.trees:
        code = f"import sys; sys.path.insert(0, {os.path.abspath(tree)!r})\n{_WORKER}"
        procs.append(subprocess.Popen([opts.python, "-c", code], env=env, text=True,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      cwd=tempfile.mkdtemp(prefix="ab-isolated-")))
    for p in procs:
        assert json.loads(p.stdout.readline())["level"] == "isolated"  # type: ignore[union-attr]
    got: list[dict[str, list[float]]] = [{} for _ in procs]

    def ask(i: int, kind: str, n: int) -> list[float]:
        p = procs[i]
        p.stdin.write(f"{kind} {n}\n")  # type: ignore[union-attr]
        p.stdin.flush()  # type: ignore[union-attr]
        return json.loads(p.stdout.readline())  # type: ignore[union-attr]

    try:
        order = list(range(len(procs)))
        for r in range(opts.rounds):
            for i in (order if r % 2 == 0 else order[::-1]):
                g = got[i]
                if "cpu" not in skip:
                    walls, cpu = ask(i, "cpu", opts.per_round)
                    g.setdefault("cpu", []).append(cpu * 1000)
                    g.setdefault("wall", []).extend(w * 1000 for w in walls)
                if "rate" not in skip:
                    rate, cpu = ask(i, "rate", 16)
                    g.setdefault("rate", []).append(rate)
                    g.setdefault("rate_cpu", []).append(cpu * 1000)
                if "rt" not in skip:
                    g.setdefault("rt", []).extend(t * 1e6 for t in ask(i, "rt", 200))
    finally:
        for p in procs:
            p.stdin.close()  # type: ignore[union-attr]
            p.wait(60)
    labels = {"cpu": ('CPU per print("hi")', "ms"), "wall": ('print("hi")', "ms"),
              "rate": ("executions/s, 4 callers", "/s"),
              "rate_cpu": ("CPU per execution, 4 callers", "ms"), "rt": ("round trip", "us")}
    for i, tree in enumerate(opts.trees):
        print(tree)
        for key, (name, unit) in labels.items():
            if key in got[i]:
                print(_line(name, got[i][key], unit, got[0][key] if i else None))


if __name__ == "__main__":
    main()
