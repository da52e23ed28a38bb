"""Compare the no-op tool round trip of two source trees, interleaved in one run.

    python benchmarks/ab_roundtrip.py OLD_TREE NEW_TREE [--rounds 12] [--calls 200]

Each tree (a checkout: ``git archive <commit> | tar -x -C DIR``) gets one host process
with a no-op engine (``execengine.bench.speed.noop_engine``, isolation ``none``); the
rounds alternate between them (A, B, A, B ...), so load from elsewhere hits both alike.
Prints the median, p90 and p99 of every tree's round trips, and the gathered-calls ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

_WORKER = r"""
import json, sys
from execengine.bench.speed import noop_engine, _ROUND_TRIPS, _GATHERED
from execengine.config import Config
with noop_engine(Config(), "none", **{"code_execution.mode": "strict"}) as engine:
    for line in sys.stdin:
        kind, n = line.split()
        script = (_ROUND_TRIPS.format(n=int(n)) if kind == "rt"
                  else _GATHERED.format(n=int(n), sleep=0.05))
        r = engine.execute(script)
        print(r.output.strip() if r.output.strip() else json.dumps({"error": r.stderr}),
              flush=True)
"""


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--gathered", type=int, default=0, help="rounds of 100 gathered calls")
    opts = ap.parse_args()
    procs = []
    for tree in opts.trees:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
        procs.append(subprocess.Popen([sys.executable, "-c", _WORKER], env=env, text=True,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      cwd="/"))
    times: list[list[float]] = [[] for _ in procs]
    gathered: list[list[float]] = [[] for _ in procs]
    try:
        for _ in range(opts.rounds):
            for i, p in enumerate(procs):
                p.stdin.write(f"rt {opts.calls}\n")  # type: ignore[union-attr]
                p.stdin.flush()  # type: ignore[union-attr]
                times[i].extend(json.loads(p.stdout.readline()))  # type: ignore[union-attr]
        for _ in range(opts.gathered):
            for i, p in enumerate(procs):
                p.stdin.write("ga 100\n")  # type: ignore[union-attr]
                p.stdin.flush()  # type: ignore[union-attr]
                total, alone = json.loads(p.stdout.readline())  # type: ignore[union-attr]
                gathered[i].append(total / alone)
    finally:
        for p in procs:
            p.stdin.close()  # type: ignore[union-attr]
            p.wait(30)
    for tree, ts, gs in zip(opts.trees, times, gathered, strict=True):
        us = [t * 1e6 for t in ts]
        line = (f"{tree}: median {statistics.median(us):7.1f} us  p90 {_quantile(us, .9):7.1f}"
                f"  p99 {_quantile(us, .99):7.1f}  (n={len(us)})")
        if gs:
            line += f"  gathered/alone median {statistics.median(gs):.3f}"
        print(line)


if __name__ == "__main__":
    main()
