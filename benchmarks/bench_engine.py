"""Engine benchmarks: figures and ratios against baselines measured in the same run.

    python benchmarks/bench_engine.py [--runs N]

1. ``print("hi")`` end to end (stage, spawn, connect, run, tear down) vs a bare
   ``python -I -S -c pass`` spawn.
2. One no-op tool round trip from a script vs a raw Unix-socket echo in Python.
3. 50 tool calls that each sleep 100 ms, issued concurrently from one script.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import threading
import time

from execengine.config import Config
from execengine.engine import Engine
from execengine.policy import ToolPolicy
from execengine.registry import ToolRegistry

NOOP_SCHEMA = {"description": "No-op.", "parameters": {
    "type": "object", "properties": {"sleep": {"type": "number"}}}}


def _registry(config: Config) -> ToolRegistry:
    reg = ToolRegistry(config)

    def noop(args: dict, ctx: object) -> dict:
        if args.get("sleep"):
            time.sleep(args["sleep"])
        return {"ok": True}

    reg.register("web_search", "web", NOOP_SCHEMA, noop,
                 policy=ToolPolicy(script_callable=True))
    return reg


def bare_spawn(runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def engine_hi(engine: Engine, runs: int) -> float:
    engine.execute('print("hi")')  # warm caches (interpreter probe, templates)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        r = engine.execute('print("hi")')
        times.append(time.perf_counter() - t0)
        assert r.output == "hi\n", r
    return statistics.median(times)


def raw_echo(n: int) -> float:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

    def serve() -> None:
        while data := b.recv(65536):
            b.sendall(data)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    msg = b'{"v":1,"type":"call","id":"1","tool":"web_search","args":{}}'
    t0 = time.perf_counter()
    for _ in range(n):
        a.sendall(msg)
        a.recv(65536)
    elapsed = (time.perf_counter() - t0) / n
    a.close()
    t.join(1)
    b.close()
    return elapsed


def tool_round_trip(engine: Engine, n: int) -> float:
    r = engine.execute(f"""
import time
from hermes_tools import web_search
web_search()
t0 = time.perf_counter()
for _ in range({n}):
    web_search()
print((time.perf_counter() - t0) / {n})
""")
    assert r.status == "success", r
    return float(r.output)


def concurrent_calls(engine: Engine) -> float:
    r = engine.execute("""
import time
from concurrent.futures import ThreadPoolExecutor
from hermes_tools import web_search
t0 = time.perf_counter()
with ThreadPoolExecutor(50) as ex:
    list(ex.map(lambda _: web_search(sleep=0.1), range(50)))
print(time.perf_counter() - t0)
""")
    assert r.status == "success", r
    return float(r.output)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--calls", type=int, default=500)
    args = ap.parse_args()
    config = Config().with_overrides({"code_execution.mode": "strict",
                                      "code_execution.max_tool_calls": args.calls + 60,
                                      "code_execution.max_parallel_tool_calls": 64})
    with _registry(config) as reg, Engine(config=config, registry=reg) as engine:
        bare = bare_spawn(args.runs)
        hi = engine_hi(engine, args.runs)
        echo = raw_echo(args.calls)
        rt = tool_round_trip(engine, args.calls)
        conc = concurrent_calls(engine)
    print(f"isolation level: {engine.launcher.level} (code_execution.isolation=auto)")
    print(f"print('hi') end to end     {hi * 1000:7.1f} ms   "
          f"bare python -I -S spawn {bare * 1000:6.1f} ms   ratio {hi / bare:5.2f}x")
    print(f"no-op tool round trip      {rt * 1e6:7.1f} us   "
          f"raw Unix-socket echo    {echo * 1e6:6.1f} us   ratio {rt / echo:5.2f}x")
    print(f"50 concurrent 100 ms calls {conc * 1000:7.1f} ms   "
          f"serial would be 5000 ms           speed-up {5.0 / conc:5.1f}x "
          f"({config.code_execution.max_parallel_tool_calls} host workers)")


if __name__ == "__main__":
    main()
