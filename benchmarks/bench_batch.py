"""Batch executors: figures and ratios against baselines measured in the same run.

    python benchmarks/bench_batch.py [--rounds N] [--isolation LEVEL] [--no-ray]

Rounds are interleaved (baseline, candidate, baseline, ...) so drift in the machine's load
falls on both sides; each figure is min / median / p90 over the rounds.

1. Local executor vs the same executions driven directly from threads (same engine, same
   concurrency, trivial scripts): throughput, and the local/direct ratio (target >= 0.90).
   The local side goes through ``run_batch``: reading the tasks file, writing the results.
2. Ray vs local at equal concurrency, 1 s scripts: seconds per task slot
   (wall x concurrency / tasks; 1.0 is ideal), and the per-task overhead of Ray over local
   (target <= 10 %). Ray is a local cluster started here (one node, one actor).
3. The same for trivial scripts (``pass``): the fixed cost a task pays on each executor.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from execengine.batch import Executor, LocalExecutor, run_batch
from execengine.config import Config
from execengine.engine import Engine


def stats(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return (f"min {ordered[0]:.3f}  median {statistics.median(ordered):.3f}  "
            f"p90 {p90:.3f}")


def tasks_file(root: str, name: str, code: str, n: int) -> str:
    path = os.path.join(root, f"{name}.jsonl")
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"{name}-{i}", "code": code}) + "\n")
    return path


def via_batch(executor: Executor, root: str, code: str, n: int) -> float:
    """Wall seconds for ``n`` tasks through run_batch (file in, file out)."""
    tasks = tasks_file(root, "t", code, n)
    out = os.path.join(root, "r.jsonl")
    t0 = time.perf_counter()
    summary = run_batch(tasks, out, executor, restart=True, progress=False)
    wall = time.perf_counter() - t0
    assert summary.counts.get("success") == n, summary.to_dict()
    return wall


def direct(engine: Engine, code: str, n: int, concurrency: int) -> float:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(lambda _: engine.execute(code), range(n)))
    wall = time.perf_counter() - t0
    assert all(r.ok for r in results), [r for r in results if not r.ok][:1]
    return wall


def interleave(rounds: int, a: Callable[[], float], b: Callable[[], float]
               ) -> tuple[list[float], list[float]]:
    xs: list[float] = []
    ys: list[float] = []
    for i in range(rounds):
        first, second = (a, b) if i % 2 == 0 else (b, a)
        r1, r2 = first(), second()
        xs.append(r1 if first is a else r2)
        ys.append(r2 if first is a else r1)
    return xs, ys


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--trivial", type=int, default=40, help="trivial tasks per round")
    ap.add_argument("--slow", type=int, default=8, help="1 s tasks per round")
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--isolation", default="none",
                    choices=("auto", "none", "restricted", "isolated"))
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args()
    c = args.concurrency
    config = Config().with_overrides({"code_execution.isolation": args.isolation,
                                      "code_execution.mode": "strict"}, origin="bench")
    root = tempfile.mkdtemp(prefix="execengine-bench-batch-")
    try:
        with Engine(config=config) as engine:
            local = LocalExecutor(engine, concurrency=c)
            engine.execute("pass")  # warm
            print(f"== 1. local executor vs direct threads: {args.trivial} trivial tasks, "
                  f"concurrency {c}, isolation {args.isolation}, {args.rounds} rounds")
            d, loc = interleave(args.rounds, lambda: direct(engine, "pass", args.trivial, c),
                                lambda: via_batch(local, root, "pass", args.trivial))
            tput_d = [args.trivial / w for w in d]
            tput_l = [args.trivial / w for w in loc]
            print(f"  direct threads  tasks/s  {stats(tput_d)}")
            print(f"  local executor  tasks/s  {stats(tput_l)}")
            ratio = statistics.median(tput_l) / statistics.median(tput_d)
            print(f"  local / direct throughput (medians): {ratio:.3f}  (target >= 0.90)")
            if args.no_ray:
                return
            ray_part(args, config, local, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def ray_part(args: argparse.Namespace, config: Config, local: LocalExecutor, root: str) -> None:
    import ray

    from execengine.batch import RayExecutor

    c = args.concurrency
    temp = tempfile.mkdtemp(prefix="ee-ray-", dir="/tmp")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    home = os.environ.get("HOME")
    os.environ["HOME"] = temp  # Ray writes its cluster token under ~/.ray: keep it in temp
    t0 = time.perf_counter()
    ray.init(num_cpus=c, include_dashboard=False, _temp_dir=temp, log_to_driver=False,
             object_store_memory=80 * 1024 * 1024, logging_level=logging.WARNING)
    try:
        started = time.perf_counter() - t0
        t0 = time.perf_counter()
        with RayExecutor(config=config, concurrency=c) as on_ray:
            print(f"\n(local Ray cluster started in {started:.1f}s, node actor ready in "
                  f"{time.perf_counter() - t0:.1f}s)")
            via_batch(on_ray, root, "pass", 2 * c)  # warm the actor's engine
            for title, code, n in (("2. 1 s tasks", "import time; time.sleep(1)", args.slow),
                                   ("3. trivial tasks", "pass", args.trivial)):
                print(f"== {title}: Ray vs local, {n} tasks a round, concurrency {c}")
                lo, ry = interleave(args.rounds, lambda code=code, n=n: via_batch(
                    local, root, code, n), lambda code=code, n=n: via_batch(
                    on_ray, root, code, n))
                per_lo = [w * c / n for w in lo]
                per_ry = [w * c / n for w in ry]
                print(f"  local  s per task slot  {stats(per_lo)}")
                print(f"  Ray    s per task slot  {stats(per_ry)}")
                m_lo, m_ry = statistics.median(per_lo), statistics.median(per_ry)
                print(f"  Ray / local (medians): {m_ry / m_lo:.3f}; per-task overhead "
                      f"{(m_ry - m_lo) * 1000:+.1f} ms ({(m_ry / m_lo - 1) * 100:+.1f} %)"
                      + ("  (target <= 10 %)" if code != "pass" else ""))
        with RayExecutor(config=config, concurrency=c, prefetch=1) as ahead:
            n = args.trivial
            print(f"== 3b. trivial tasks: Ray with prefetch=1 vs local, {n} tasks a round")
            lo, ry = interleave(args.rounds, lambda: via_batch(local, root, "pass", n),
                                lambda: via_batch(ahead, root, "pass", n))
            per_lo = [w * c / n for w in lo]
            per_ry = [w * c / n for w in ry]
            print(f"  local  s per task slot  {stats(per_lo)}")
            print(f"  Ray    s per task slot  {stats(per_ry)}")
            m_lo, m_ry = statistics.median(per_lo), statistics.median(per_ry)
            print(f"  Ray / local (medians): {m_ry / m_lo:.3f}; per-task overhead "
                  f"{(m_ry - m_lo) * 1000:+.1f} ms ({(m_ry / m_lo - 1) * 100:+.1f} %)")
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
        if home is not None:
            os.environ["HOME"] = home


if __name__ == "__main__":
    main()
