"""Session benchmarks: a cell of a live session beside a one-shot execution.

    python benchmarks/bench_sessions.py [--runs N] [--levels none,restricted,isolated]

Per isolation level (those this host supports):

1. ``print("hi")`` end to end: one-shot ``Engine.execute`` vs a cell of a live session
   (median, p90), and the kernel's start-up (the session's first cell).
2. One no-op tool round trip, timed inside the script (``perf_counter`` around 200 calls):
   from a one-shot script vs from a cell (median of 5 alternated runs of each, each once
   the launcher's next interpreter is started: a cell run while it starts shared the
   CPUs with it, and read 2-3x the one-shot's at ``none``).
"""

from __future__ import annotations

import argparse
import statistics
import time

from _settle import settled

from execengine.config import Config
from execengine.engine import Engine
from execengine.errors import IsolationError
from execengine.isolation import detect
from execengine.policy import ToolPolicy
from execengine.registry import ToolRegistry

NOOP_SCHEMA = {"description": "No-op.", "parameters": {"type": "object", "properties": {}}}
ROUND_TRIPS = ("from hermes_tools import web_search\nimport time\nweb_search()\n"
               "t = time.perf_counter()\nfor _ in range(200):\n    web_search()\n"
               "print((time.perf_counter() - t) / 200)")


def _registry(config: Config) -> ToolRegistry:
    reg = ToolRegistry(config)
    reg.register("web_search", "web", NOOP_SCHEMA, lambda args, ctx: {"ok": True},
                 policy=ToolPolicy(script_callable=True))
    return reg


def _median_p90(times: list[float]) -> tuple[float, float]:
    times = sorted(times)
    return statistics.median(times), times[int(len(times) * 0.9)]


def _timed(fn, runs: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def bench_level(level: str, runs: int) -> None:
    cfg = Config().with_overrides({"code_execution.mode": "strict",
                                   "code_execution.isolation": level})
    with _registry(cfg) as reg, Engine(config=cfg, registry=reg) as engine:
        engine.execute('print("hi")')  # warm: runtime copy, interpreter probe, launcher
        one_shot = _timed(lambda: engine.execute('print("hi")'), max(5, runs // 10))
        t0 = time.perf_counter()
        assert engine.execute("pass", session="bench").ok
        startup = time.perf_counter() - t0

        def cell() -> None:
            r = engine.execute('print("hi")', session="bench")
            assert r.output == "hi\n", r

        cells = _timed(cell, runs)
        one, mine = [], []
        for _ in range(5):  # alternated, so both see the same load, each once the
            settled(engine)  # interpreter started ahead for the next one-shot is there
            one.append(float(engine.execute(ROUND_TRIPS).output))
            settled(engine)
            mine.append(float(engine.execute(ROUND_TRIPS, session="bench").output))
        rt_one, rt_cell = statistics.median(one), statistics.median(mine)
    om, op = _median_p90(one_shot)
    cm, cp = _median_p90(cells)
    print(f"[{level}]")
    print(f"  print('hi') one-shot      median {om * 1e3:8.2f} ms   p90 {op * 1e3:8.2f} ms")
    print(f"  print('hi') session cell  median {cm * 1e3:8.2f} ms   p90 {cp * 1e3:8.2f} ms"
          f"   ({om / cm:.0f}x faster)")
    print(f"  kernel start (first cell)        {startup * 1e3:8.2f} ms")
    print(f"  tool round trip one-shot         {rt_one * 1e6:8.1f} us")
    print(f"  tool round trip session cell     {rt_cell * 1e6:8.1f} us"
          f"   (ratio {rt_cell / rt_one:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="cells timed per level")
    parser.add_argument("--levels", default="none,restricted,isolated")
    args = parser.parse_args()
    report = detect()
    for level in args.levels.split(","):
        if not report.levels.get(level):
            print(f"[{level}] unavailable: {report.reasons.get(level)}")
            continue
        try:
            bench_level(level, args.runs)
        except IsolationError as exc:
            print(f"[{level}] unavailable: {exc}")


if __name__ == "__main__":
    main()
