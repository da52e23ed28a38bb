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

#: the round trips, and the script's CPU time and context switches per call
_ROUND_TRIPS = """
import json, resource, time
from hermes_tools import web_search
web_search()
t = []
ru0, c0 = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
for _ in range({n}):
    t0 = time.perf_counter()
    web_search()
    t.append(time.perf_counter() - t0)
ru1, c1 = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
print(json.dumps([t, (c1 - c0) / {n}, (ru1.ru_nvcsw + ru1.ru_nivcsw - ru0.ru_nvcsw
                                      - ru0.ru_nivcsw) / {n}]))
"""

_WORKER = r"""
import json, resource, sys, time
from execengine.bench.speed import noop_engine, _GATHERED
from execengine.config import Config
with noop_engine(Config(), "none", **{"code_execution.mode": "strict"}) as engine:
    for line in sys.stdin:
        kind, n = line.split()
        script = (ROUND_TRIPS.format(n=int(n)) if kind == "rt"
                  else _GATHERED.format(n=int(n), sleep=0.05))
        c0, ru0 = time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
        r = engine.execute(script)
        host = (time.process_time() - c0) / int(n)
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        switches = (ru1.ru_nvcsw + ru1.ru_nivcsw - ru0.ru_nvcsw - ru0.ru_nivcsw) / int(n)
        out = json.loads(r.output) if r.output.strip() else {"error": r.stderr}
        print(json.dumps(out + [host, switches] if kind == "rt" else out), flush=True)
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
        worker = f"ROUND_TRIPS = {_ROUND_TRIPS!r}\n{_WORKER}"
        procs.append(subprocess.Popen([sys.executable, "-c", worker], env=env, text=True,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      cwd="/"))
    times: list[list[float]] = [[] for _ in procs]
    cpu: list[list[tuple[float, float, float, float]]] = [[] for _ in procs]
    gathered: list[list[float]] = [[] for _ in procs]
    try:
        for _ in range(opts.rounds):
            for i, p in enumerate(procs):
                p.stdin.write(f"rt {opts.calls}\n")  # type: ignore[union-attr]
                p.stdin.flush()  # type: ignore[union-attr]
                ts, child_cpu, switches, host_cpu, host_switches = json.loads(
                    p.stdout.readline())  # type: ignore[union-attr]
                times[i].extend(ts)
                cpu[i].append((child_cpu, switches, host_cpu, host_switches))
        for _ in range(opts.gathered):
            for i, p in enumerate(procs):
                p.stdin.write("ga 100\n")  # type: ignore[union-attr]
                p.stdin.flush()  # type: ignore[union-attr]
                # [total, the slowest call's own time, one call alone] (older trees: no
                # slowest); the ratio to one alone compares across trees
                out = json.loads(p.stdout.readline())  # type: ignore[union-attr]
                gathered[i].append(out[0] / out[-1])
    finally:
        for p in procs:
            p.stdin.close()  # type: ignore[union-attr]
            p.wait(30)
    for tree, ts, cs, gs in zip(opts.trees, times, cpu, gathered, strict=True):
        us = [t * 1e6 for t in ts]
        child_cpu, switches, host_cpu, host_switches = (
            statistics.median(c[k] for c in cs) for k in range(4))
        line = (f"{tree}:\n  round trip p10 {_quantile(us, .1):6.1f} us  median "
                f"{statistics.median(us):6.1f}  p90 {_quantile(us, .9):7.1f}  p99 "
                f"{_quantile(us, .99):7.1f}  (n={len(us)})\n  per call: script CPU "
                f"{child_cpu * 1e6:.1f} us, {switches:.2f} context switches; host CPU "
                f"{host_cpu * 1e6:.1f} us, {host_switches:.2f} context switches (both "
                "with the launch)")
        if gs:
            line += f"  gathered/alone median {statistics.median(gs):.3f}"
        print(line)


if __name__ == "__main__":
    main()
