"""Speed benchmarks: every figure beside a baseline measured in the same run, interleaved.

Suites (``execengine bench speed --suite NAME``; all by default):

- **startup**: ``print("hi")`` end to end at each available isolation level, against
  ``python -c pass`` and ``python -I -S -c pass`` on the same interpreter; wall time and
  the CPU time it costs (host, children, and the spawner with what it reaps: speculative
  warm preparation counts);
- **launch**: the launcher alone starting ``python -I -S -c pass`` at each level, against
  the same bare spawn;
- **roundtrip**: one no-op tool call from a script (median, p99) against a raw Unix-socket
  echo through a reader thread, and against the least any Python host loop does per call
  (two processes: ``epoll``, a read, JSON both ways, no dispatch); 1,000 no-op calls
  gathered with asyncio against the same calls one after another; and 100 calls of a 50 ms
  tool gathered concurrently against the slowest of them (its own time) and against one
  such call alone (a warm one: a process's first call also connects);
- **concurrency**: 50 calls of a 100 ms tool from 50 threads of one script, with the
  default ``max_parallel_tool_calls`` and with 64;
- **throughput**: trivial executions per second with 1, 2, 4 and 8 callers against bare
  ``python -c pass`` spawns at the same concurrency;
- **scaling**: a script making 10 to 1,000 ``read_file`` calls against the same calls
  dispatched in-process, and scripts printing 1 KB to 100 MB against a bare interpreter
  printing the same into a pipe that is read and discarded;
- **memory**: the host's resident memory over many executions (it must stay flat);
- **reference** (with ``--reference PYTHON``, an interpreter with the reference system,
  Hermes ``execute_code``: see :mod:`~execengine.bench.reference`): ``print("hi")`` end to
  end and its CPU at ``none`` and at the default level, a no-op tool round trip, and trivial
  executions per second with 4 callers, each against the reference's own, interleaved.

Every benchmark lives in this package, so it runs from an installed wheel. Figures are
medians with min and p90 (``--json`` adds p99 and the sample counts). Benchmarks print
figures; they are not tests and assert nothing about speed.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil

from execengine._runtime import runtime_module
from execengine.bench import reference
from execengine.bench.stats import Figure, Spread, interleaved, timed
from execengine.config import Config, load_config
from execengine.context import CallContext
from execengine.engine.core import Engine
from execengine.errors import BenchError
from execengine.isolation import detect
from execengine.launch.base import LaunchSpec
from execengine.launch.factory import make_launcher
from execengine.policy import ToolPolicy
from execengine.registry import ToolRegistry

SUITES = ("startup", "launch", "roundtrip", "concurrency", "throughput", "scaling", "memory",
          "reference")
LEVELS = ("none", "restricted", "isolated")
NOOP_SCHEMA = {"description": "A tool that does nothing (optionally sleeps).", "parameters": {
    "type": "object", "properties": {"sleep": {"type": "number"}}}}


# -- engines ---------------------------------------------------------------------------------


def _noop_registry(config: Config) -> Any:

    reg = ToolRegistry(config)

    def noop(args: dict[str, Any], ctx: object) -> dict[str, bool]:
        if args.get("sleep"):
            time.sleep(float(args["sleep"]))
        return {"ok": True}

    reg.register("web_search", "web", NOOP_SCHEMA, noop,
                 policy=ToolPolicy(script_callable=True))
    return reg


@contextlib.contextmanager
def noop_engine(config: Config, level: str | None = None, **overrides: Any) -> Iterator[Any]:
    """An engine whose only tool, ``web_search``, is a no-op (``sleep`` seconds)."""

    settings: dict[str, Any] = {"code_execution.max_tool_calls": 5000,
                                "code_execution.timeout": 300.0, **overrides}
    if level is not None:
        settings["code_execution.isolation"] = level
        settings["code_execution.min_isolation"] = level
    cfg = config.with_overrides(settings)
    reg = _noop_registry(cfg)
    try:
        with Engine(cfg, reg) as engine:
            yield engine
    finally:
        reg.close()


def make_engine(config: Config, root: str) -> Any:
    """An engine with the built-in tools working in ``root``."""

    cfg = config.with_overrides({"terminal.cwd": root, "code_execution.max_tool_calls": 5000,
                                 "code_execution.timeout": 300.0})
    return Engine(cfg, ToolRegistry.with_builtins(cfg, plugins=False))


def available_levels() -> list[str]:

    report = detect()
    return [lv for lv in LEVELS if report.levels.get(lv)]


def _checked(result: Any, what: str) -> Any:
    if result.status != "success":
        raise RuntimeError(f"{what} failed: {result.status}: {result.error}")
    if result.full_output_path:
        Path(result.full_output_path).unlink(missing_ok=True)
    return result


# -- CPU accounting ----------------------------------------------------------------------------


def cpu_seconds() -> float:
    """CPU time of this process, its reaped children, and every descendant still there
    (running or a zombie) with what it reaped. Every level counts: at ``isolated`` the
    host has the result from the namespace's init before the init and so the spawner have
    reaped the execution, so its time is still in those processes then; the template
    reaps the interpreters it forks with ``wait`` (a process the kernel reaps, with
    SIGCHLD ignored, takes its time with it)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            t = child.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
    return total


def _cpu_and_wall(fn: Callable[[], Any]) -> tuple[float, float]:
    """Wall time of ``fn``; CPU time until what it set off has settled (see
    :func:`_settled`), so that work a launch starts ahead for the next one (a warm
    sandbox entry, a pre-started interpreter) counts in its own sample, not the next."""
    c, w = cpu_seconds(), time.perf_counter()
    fn()
    wall = time.perf_counter() - w
    return wall, _settled() - c


def _settled(window: float = 0.01, idle: float = 0.0005, quiet: int = 3,
             limit: float = 2.0) -> float:
    """Wait until this process and its descendants use under ``idle`` seconds of CPU in
    each of ``quiet`` windows in a row of ``window`` seconds (at most ``limit`` seconds);
    their CPU time then, less what this waiting (reading every descendant's times) cost
    this thread. One quiet window was not enough: a warm entry sleeps for a cgroup
    migration (an RCU grace period, up to 20 ms) before it starts the next interpreter,
    and that start then landed in the next sample (isolated's CPU per sample spread from
    15 to 136 ms around an 85 ms median)."""
    end = time.monotonic() + limit
    own = time.thread_time()
    last = cpu_seconds() - (time.thread_time() - own)
    calm = 0
    while time.monotonic() < end:
        time.sleep(window)
        now = cpu_seconds() - (time.thread_time() - own)
        calm = calm + 1 if now - last < idle else 0
        last = now
        if calm >= quiet:
            break
    return last


def _sampled(cpu: dict[str, list[float]], key: str, fn: Callable[[], Any]
             ) -> Callable[[], float]:
    """``fn`` as an interleaved sample: it returns its wall time and adds its CPU time
    (:func:`_cpu_and_wall`) to ``cpu[key]``."""
    def run() -> float:
        wall, used = _cpu_and_wall(fn)
        cpu.setdefault(key, []).append(used)
        return wall
    return run


def _print_hi(engine: Any, cwd: str) -> Callable[[], Any]:
    """``print("hi")`` run by ``engine`` in ``cwd`` (a failure raises)."""
    return lambda: _checked(engine.execute('print("hi")', mode="project", cwd=cwd),
                            'print("hi")')


# -- suites ------------------------------------------------------------------------------------


def startup(config: Config, *, reps: int, levels: list[str]) -> list[Figure]:
    bare = [sys.executable, "-c", "pass"]
    bare_is = [sys.executable, "-I", "-S", "-c", "pass"]
    out: list[Figure] = []
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as cwd:
        engines = {lv: stack.enter_context(noop_engine(config, lv)) for lv in levels}
        for lv in levels:  # warm-up: spawner, probes, stub
            for _ in range(3):
                _print_hi(engines[lv], cwd)()
        cpu: dict[str, list[float]] = {}
        fns = [_sampled(cpu, "pass", lambda: subprocess.run(bare, check=True)),
               _sampled(cpu, "-I -S pass", lambda: subprocess.run(bare_is, check=True)),
               *[_sampled(cpu, lv, _print_hi(engines[lv], cwd)) for lv in levels]]
        walls = interleaved(reps, *fns)
    base, base_is = Spread.of(walls[0]).scaled(1000), Spread.of(walls[1]).scaled(1000)
    cpu_base = Spread.of(cpu["pass"]).scaled(1000)
    for lv, samples in zip(levels, walls[2:], strict=True):
        value = Spread.of(samples).scaled(1000)
        out.append(Figure(f'print("hi") at {lv}', value, base, "ms", "python -c pass"))
        out.append(Figure(f'print("hi") at {lv}', value, base_is, "ms",
                          "python -I -S -c pass"))
        out.append(Figure(f'CPU per print("hi") at {lv}', Spread.of(cpu[lv]).scaled(1000),
                          cpu_base, "ms", "python -c pass CPU"))
    if "none" in levels:
        none = Spread.of(walls[2]).scaled(1000)
        for lv, samples in zip(levels[1:], walls[3:], strict=True):
            out.append(Figure(f'print("hi") at {lv}', Spread.of(samples).scaled(1000), none,
                              "ms", "the same at none"))
    return out


def launch(config: Config, *, reps: int, levels: list[str]) -> list[Figure]:

    bare = [sys.executable, "-I", "-S", "-c", "pass"]
    out: list[Figure] = []
    with tempfile.TemporaryDirectory() as cwd:
        launchers = {}
        for lv in levels:
            launchers[lv] = make_launcher(config.with_overrides(
                {"code_execution.isolation": lv, "code_execution.min_isolation": lv}))

        def start(lv: str) -> Callable[[], float]:
            def run() -> float:
                token = secrets.token_hex(8)
                spec = LaunchSpec(argv=bare, env={"EXECENGINE_RUN_TOKEN": token}, cwd=cwd,
                                  run_token=token, writable_paths=(cwd,))
                t = time.perf_counter()
                with launchers[lv].launch(spec) as child:
                    child.wait(30)
                return time.perf_counter() - t
            return run

        try:
            for lv in levels:
                for _ in range(3):
                    start(lv)()
            walls = interleaved(reps, lambda: timed(lambda: subprocess.run(bare, check=True)),
                                *[start(lv) for lv in levels])
        finally:
            for launcher in launchers.values():
                launcher.close()
    base = Spread.of(walls[0]).scaled(1000)
    for lv, samples in zip(levels, walls[1:], strict=True):
        out.append(Figure(f"launch python -I -S -c pass at {lv}",
                          Spread.of(samples).scaled(1000), base, "ms", "subprocess.run"))
    return out


#: a script timing ``n`` no-op round trips after one warm-up call (its connect); prints them
ROUND_TRIPS = """
import json, time
from hermes_tools import web_search
web_search()
t = []
for _ in range({n}):
    t0 = time.perf_counter()
    web_search()
    t.append(time.perf_counter() - t0)
print(json.dumps(t))
"""

#: 1,000 calls of a no-op tool gathered with asyncio, and the same calls one after another
_GATHERED_FAST = """
import asyncio, json, time
from hermes_tools import aio, web_search
web_search()  # the process's first call connects to the host
async def main():
    t0 = time.perf_counter()
    await asyncio.gather(*[aio.web_search() for _ in range({n})])
    return time.perf_counter() - t0
gathered = asyncio.run(main())
t0 = time.perf_counter()
for _ in range({n}):
    web_search()
print(json.dumps([gathered, time.perf_counter() - t0]))
"""

_GATHERED = """
import asyncio, json, time
from hermes_tools import aio
async def one():
    t0 = time.perf_counter()
    await aio.web_search(sleep={sleep})
    return time.perf_counter() - t0
async def main():
    await one()  # the process's first call connects to the host: not a call's own time
    alone = await one()
    t0 = time.perf_counter()
    own = await asyncio.gather(*[one() for _ in range({n})])
    return time.perf_counter() - t0, max(own), alone
print(json.dumps(asyncio.run(main())))
"""


def _round_trips_into(samples: list[float], engine: Any, calls: int) -> Callable[[], float]:
    """One interleavable sample: a script timing ``calls`` no-op round trips (:data:`
    ROUND_TRIPS`), its times added to ``samples``."""
    def run() -> float:
        r = _checked(engine.execute(ROUND_TRIPS.format(n=calls)), "round trips")
        samples.extend(json.loads(r.output))
        return 0.0
    return run


def echo_round_trips(n: int) -> list[float]:
    """Round trips of a 60-byte message over a Unix socket pair to an echo thread, the
    reply read by a reader thread and handed over (the shape of the child's client)."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    msg = b'{"v":1,"type":"call","id":"1","tool":"web_search","args":{}}'
    got = threading.Event()

    def serve() -> None:
        while data := b.recv(65536):
            b.sendall(data)

    def read() -> None:
        while a.recv(65536):
            got.set()

    threads = [threading.Thread(target=serve, daemon=True),
               threading.Thread(target=read, daemon=True)]
    for t in threads:
        t.start()
    times = []
    try:
        for _ in range(n):
            got.clear()
            t0 = time.perf_counter()
            a.sendall(msg)
            got.wait()
            times.append(time.perf_counter() - t0)
    finally:
        a.shutdown(socket.SHUT_RDWR)
        b.shutdown(socket.SHUT_RDWR)
        for t in threads:
            t.join(2)
        a.close()
        b.close()
    return times


#: the least a Python host and client can do per call: the client sends a framed JSON call
#: and decodes the reply; the host (a forked process) waits in ``epoll`` with a timeout, as
#: the real loop does, reads, parses, and answers from a template. No dispatch, no checks.
#: The client first polls for its reply for up to ``spin`` seconds (argv[2]), as ours does.
_MINIMAL_LOOP = r"""
import json, os, select, socket, sys, time
n, spin = int(sys.argv[1]), float(sys.argv[2])
clock = time.perf_counter
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
pid = os.fork()
if pid == 0:
    a.close()
    b.setblocking(False)
    ep = select.epoll()
    ep.register(b.fileno(), select.EPOLLIN)
    quote = json.encoder.encode_basestring
    buf = bytearray(262144)  # reused, as the real loop's
    while True:
        ep.poll(0.1)
        try:
            got = b.recv_into(buf)
        except BlockingIOError:
            continue
        if not got:
            os._exit(0)
        call = json.loads(buf[2:got].decode("utf-8"))
        reply = ('{"v":1,"type":"result","id":' + quote(call["id"]) + ',"result":'
                 + quote(json.dumps({"ok": True})) + "}").encode("utf-8")
        b.send(bytes((0, len(reply))) + reply)
b.close()
poller = select.poll()
poller.register(a.fileno(), select.POLLIN)
times = []
for i in range(n + 1):
    t0 = clock()
    msg = json.dumps({"v": 1, "type": "call", "id": str(i), "tool": "web_search",
                      "args": {}}).encode("utf-8")
    a.send(bytes((0, len(msg))) + msg)
    until = clock() + spin
    while not poller.poll(0) and clock() < until:
        pass
    reply = a.recv(65536)
    json.loads(json.loads(reply[2:].decode("utf-8"))["result"])
    times.append(clock() - t0)
a.close()
os.waitpid(pid, 0)
print(json.dumps(times[1:]))
"""


def minimal_loop_round_trips(n: int) -> list[float]:
    """Round trips of :data:`_MINIMAL_LOOP`: what any Python host loop costs here."""
    spin = runtime_module("client").SPIN
    out = subprocess.run([sys.executable, "-I", "-c", _MINIMAL_LOOP, str(n), str(spin)],
                         capture_output=True, text=True, check=True, timeout=120)
    times: list[float] = json.loads(out.stdout)
    return times


#: a script calling a no-op tool back to back for ``seconds``
_CALL_LOOP = """
import time
from hermes_tools import web_search
end = time.perf_counter() + {seconds}
while time.perf_counter() < end:
    web_search()
"""


def _ticker_lateness(during: Callable[[], None]) -> list[float]:
    """How late a host thread that sleeps 1 ms at a time wakes and runs a little Python,
    while ``during`` runs on this thread: what the engine costs the embedding
    application's own threads (they share the interpreter lock with the RPC loop)."""
    late: list[float] = []
    stop = threading.Event()

    def tick() -> None:
        clock = time.perf_counter
        while not stop.is_set():
            due = clock() + 0.001
            time.sleep(0.001)
            sum(range(200))
            late.append(clock() - due)

    ticker = threading.Thread(target=tick, name="bench-ticker", daemon=True)
    ticker.start()
    try:
        during()
    finally:
        stop.set()
        ticker.join()
    return late


def roundtrip(config: Config, *, reps: int) -> list[Figure]:
    calls, rounds = 200, max(3, reps // 4)
    ours: list[float] = []
    echo: list[float] = []
    floor: list[float] = []
    with noop_engine(config, "none", **{"code_execution.mode": "strict"}) as engine:
        script = _round_trips_into(ours, engine, calls)

        def baseline() -> float:
            echo.extend(echo_round_trips(calls))
            return 0.0

        def least() -> float:
            floor.extend(minimal_loop_round_trips(calls))
            return 0.0

        interleaved(rounds, script, baseline, least)
        burst: list[float] = []
        serial: list[float] = []
        for _ in range(rounds):
            r = _checked(engine.execute(_GATHERED_FAST.format(n=1000)), "gathered no-op calls")
            together, one_by_one = json.loads(r.output)
            burst.append(together)
            serial.append(one_by_one)
        gathered: list[float] = []
        slowest: list[float] = []
        alone: list[float] = []
        for _ in range(rounds):
            r = _checked(engine.execute(_GATHERED.format(n=100, sleep=0.05)), "gathered calls")
            total, own, one = json.loads(r.output)
            gathered.append(total)
            slowest.append(own)
            alone.append(one)
        busy: list[float] = []
        idle: list[float] = []
        seconds = 0.5

        def calling() -> float:
            busy.extend(_ticker_lateness(lambda: _checked(
                engine.execute(_CALL_LOOP.format(seconds=seconds)), "a loop of calls")))
            return 0.0

        def resting() -> float:
            idle.extend(_ticker_lateness(lambda: time.sleep(seconds)))
            return 0.0

        interleaved(max(2, reps // 8), calling, resting)
    return [
        Figure("no-op tool round trip", Spread.of(ours).scaled(1e6), Spread.of(echo).scaled(1e6),
               "us", "Unix-socket echo + reader thread", show_p99=True),
        Figure("no-op tool round trip (Python floor)",
               Spread.of(ours).scaled(1e6), Spread.of(floor).scaled(1e6), "us",
               "minimal Python loop + JSON, two processes, the client polling as ours",
               show_p99=True),
        Figure("1,000 gathered no-op calls", Spread.of(burst).scaled(1000),
               Spread.of(serial).scaled(1000), "ms", "the same calls one after another"),
        Figure("100 gathered 50 ms calls", Spread.of(gathered).scaled(1000),
               Spread.of(slowest).scaled(1000), "ms", "the slowest of them, its own time"),
        Figure("100 gathered 50 ms calls (one alone)", Spread.of(gathered).scaled(1000),
               Spread.of(alone).scaled(1000), "ms", "one such call alone"),
        Figure("a host thread's 1 ms sleep, late by, while a script calls",
               Spread.of(busy).scaled(1e6), Spread.of(idle).scaled(1e6), "us",
               "the same with the engine idle", show_p99=True),
    ]


_THREADS = """
import time
from concurrent.futures import ThreadPoolExecutor
from hermes_tools import web_search
t0 = time.perf_counter()
with ThreadPoolExecutor(50) as ex:
    list(ex.map(lambda _: web_search(sleep=0.1), range(50)))
print(time.perf_counter() - t0)
"""


def concurrency(config: Config, *, reps: int) -> list[Figure]:
    out = []
    serial = Spread.of([5.0]).scaled(1000)
    for workers in (None, 64):
        extra = {} if workers is None else {"code_execution.max_parallel_tool_calls": workers}
        with noop_engine(config, "none", **extra) as engine:
            label = engine.config.code_execution.max_parallel_tool_calls
            samples = [float(_checked(engine.execute(_THREADS), "threads").output)
                       for _ in range(max(3, reps // 4))]
        out.append(Figure(f"50 threads x 100 ms calls ({label} host workers)",
                          Spread.of(samples).scaled(1000), serial, "ms", "serial"))
    return out


def _rate(count: int, workers: int, job: Callable[[], Any]) -> float:
    """Jobs per second running ``count`` jobs on ``workers`` threads."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        started = time.perf_counter()
        for f in [pool.submit(job) for _ in range(count)]:
            f.result()
        return count / (time.perf_counter() - started)


def throughput(config: Config, *, reps: int) -> list[Figure]:
    bare = [sys.executable, "-c", "pass"]
    out = []
    rounds = max(3, reps // 5)
    with noop_engine(config) as engine:
        engine.execute("pass")

        def job() -> None:
            _checked(engine.execute("pass", tools=[]), "trivial execution")

        def spawn() -> None:
            subprocess.run(bare, check=True)

        for workers in (1, 2, 4, 8):
            count = 4 * workers
            rates = interleaved(rounds, _bind(_rate, count, workers, spawn),
                                _bind(_rate, count, workers, job))
            out.append(Figure(f"executions/s, {workers} callers ({engine.launcher.level})",
                              Spread.of(rates[1]), Spread.of(rates[0]), "exec/s",
                              "python -c pass spawns/s", higher_better=True))
    return out


def _bind(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    return lambda: fn(*args)


def _time_exec(engine: Any, code: str, tools: list[str]) -> float:
    return timed(lambda: _checked(engine.execute(code, tools=tools), "script"))


def _time_dispatch(registry: Any, n: int, root: str) -> float:
    context = CallContext(cwd=root)

    def run() -> None:
        for _ in range(n):
            registry.dispatch("read_file", {"path": "small.txt"}, context)
    return timed(run)


def _bare_pipe(code: str) -> None:
    """A bare interpreter running ``code``, its stdout read through a pipe and dropped."""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    while proc.stdout.read(1 << 16):
        pass
    proc.stdout.close()
    proc.wait()


def scaling(config: Config, *, reps: int, quick: bool) -> list[Figure]:
    out = []
    rounds = 3
    with tempfile.TemporaryDirectory(prefix="execengine-speed-") as root, \
            make_engine(config, root) as engine:
        try:
            Path(root, "small.txt").write_text("hello\n" * 20)
            # the engine's first execution pays for its start (the tool set's stub, a cold
            # sandbox entry): not part of any figure
            _time_exec(engine, "print('warm')", ["read_file"])
            _time_dispatch(engine.registry, 10, root)
            for n in ((10, 100) if quick else (10, 100, 1000)):
                code = ("from hermes_tools import read_file\n"
                        f"for _ in range({n}):\n    read_file('small.txt')\nprint('done')\n")

                walls = interleaved(rounds, _bind(_time_exec, engine, code, ["read_file"]),
                                    _bind(_time_dispatch, engine.registry, n, root))
                out.append(Figure(f"{n} read_file calls, whole execution",
                                  Spread.of(walls[0]).scaled(1000),
                                  Spread.of(walls[1]).scaled(1000), "ms", "in-process"))
            sizes = ((1 << 10, 1 << 20, 10 << 20) if quick
                     else (1 << 10, 1 << 20, 10 << 20, 100 << 20))
            for size in sizes:
                code = (f"import sys\nchunk = 'x' * 65536\nn = {size}\n"
                        "while n > 0:\n    sys.stdout.write(chunk[:min(n, 65536)])\n"
                        "    n -= 65536\n")
                walls = interleaved(rounds, _bind(_time_exec, engine, code, []),
                                    _bind(timed, _bind(_bare_pipe, code)))
                label = f"{size >> 20} MB" if size >= 1 << 20 else f"{size >> 10} KB"
                out.append(Figure(f"print {label}, whole execution",
                                  Spread.of(walls[0]).scaled(1000),
                                  Spread.of(walls[1]).scaled(1000), "ms", "bare pipe, drained"))
        finally:
            engine.registry.close()
    return out


def memory(config: Config, *, quick: bool) -> list[Figure]:
    runs = 200 if quick else 2000
    proc = psutil.Process()
    with noop_engine(config) as engine:
        for _ in range(50):
            engine.execute("print('warm')", tools=[])
        start = proc.memory_info().rss / 2**20
        samples = []
        for i in range(runs):
            _checked(engine.execute("from hermes_tools import web_search\nweb_search()"),
                     "memory run")
            if i % 100 == 99:
                samples.append(proc.memory_info().rss / 2**20)
    return [Figure(f"host RSS over {runs} executions", Spread.of(samples),
                   Spread.of([start]), "MiB", "after 50 warm-up runs")]


def versus_reference(config: Config, python: str, *, reps: int,
                     emit: Callable[[str], None]) -> list[Figure]:
    """The **reference** suite: ours against the reference's ``execute_code``, both on
    ``python`` and its site (see :mod:`~execengine.bench.reference`): here when this
    process runs that interpreter, else in a process of it started for the suite, whose
    figures come back."""
    python = reference.interpreter_path(python)
    if not reference.same_interpreter(python):
        return _versus_under(config, python, reps=reps, emit=emit)
    with reference.Reference(python) as ref:
        return versus(config, ref, reps=reps, emit=emit)


def _versus_under(config: Config, python: str, *, reps: int,
                  emit: Callable[[str], None]) -> list[Figure]:
    """:func:`versus_reference` run by a process of ``python`` (:func:`reference_main`)."""
    if not os.access(python, os.X_OK):
        raise BenchError(f"--reference {python}: not an executable interpreter")
    emit(f"the reference suite runs on the reference's interpreter, {python} (ours on it "
         "too: one interpreter and site for both)")
    path = config.config_path()
    # its scripts, and ours, start that interpreter itself: not an active virtualenv's
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    with tempfile.TemporaryDirectory(prefix="execengine-versus-") as tmp:
        out = Path(tmp, "figures.json")
        spec = json.dumps({"python": python, "reps": reps, "json": str(out),
                           "config": str(path) if path else None})
        cmd = reference.under(python, "execengine.bench.speed", "reference_main", spec)
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                    env=env, text=True)
        except OSError as exc:
            raise BenchError(f"--reference {python}: {exc.strerror}") from exc
        assert proc.stdout is not None
        with proc:
            for line in proc.stdout:
                emit(line.rstrip("\n"))
        result = json.loads(out.read_text()) if out.exists() else {}
    if "figures" not in result:
        raise BenchError(result.get("error") or f"the reference suite under {python} ended "
                         f"with status {proc.returncode} and no figures (its errors above)")
    return [Figure.from_dict(f) for f in result["figures"]]


def reference_main(spec: str) -> int:
    """In a process of the reference's interpreter (see :func:`_versus_under`): run the
    suite and write its figures, or the error that stopped it, as JSON."""
    args = json.loads(spec)
    config = load_config(args["config"]) if args["config"] else Config()
    try:
        with reference.Reference(args["python"]) as ref:
            figures = versus(config, ref, reps=int(args["reps"]),
                             emit=lambda line: print(line, flush=True))
        result: dict[str, Any] = {"figures": [f.to_dict() for f in figures]}
    except BenchError as exc:
        result = {"error": str(exc)}
    Path(args["json"]).write_text(json.dumps(result), encoding="utf-8")
    return 0


def versus(config: Config, ref: reference.Reference, *, reps: int,
           emit: Callable[[str], None]) -> list[Figure]:
    """The reference suite with ``ref``'s driver, in a process of its interpreter: ours
    and the reference's floors first (:func:`.reference.agreed_floors`: refused when they
    differ by more than 10 %), then each figure interleaved with the reference's."""
    here = sys.version.split()[0]
    emit(f"reference: hermes-agent {ref.version} on python {ref.python} at {sys.executable}"
         + ("" if ref.prefix == sys.prefix else
            f" (its prefix {ref.prefix}, ours {sys.prefix}: not the same site)")
         + ("" if ref.python == here else f" (ours: {here}; not the same interpreter)"))
    # our scripts start this interpreter (an active virtualenv's would be another one)
    child = [sys.executable, "-c", "pass"]
    out: list[Figure] = []
    cpu: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as cwd, contextlib.ExitStack() as stack:
        python = {"code_execution.python": sys.executable}
        engines = {"none": stack.enter_context(noop_engine(config, "none", **python))}
        default = stack.enter_context(noop_engine(config, **python))
        if default.launcher.level != "none":
            engines[default.launcher.level] = default

        def theirs(key: str, code: str | None) -> Callable[[], float]:
            def run() -> float:
                r = ref.run(code)
                if code is not None and r.outputs != ["hi\n"]:
                    raise BenchError(f"the reference printed {r.outputs!r}, not 'hi'")
                cpu.setdefault(key, []).append(r.cpu)
                return r.wall
            return run

        for _ in range(3):  # warm-up: spawner, probes, stub; the reference's own imports
            theirs("warm-up", 'print("hi")')()
            for engine in engines.values():
                _print_hi(engine, cwd)()
        cpu.clear()
        floor, floor_ref = reference.agreed_floors(
            _sampled(cpu, "pass", lambda: subprocess.run(child, check=True)),
            theirs("reference pass", None), rounds=max(reps, 10), emit=emit)
        out.append(Figure("python -c pass, our child's interpreter", floor, floor_ref, "ms",
                          "the reference's"))
        cpu_pass = Spread.of(cpu["pass"]).scaled(1000)
        walls = interleaved(reps, theirs("reference", 'print("hi")'),
                            *[_sampled(cpu, lv, _print_hi(e, cwd)) for lv, e in engines.items()])
        wall_ref = Spread.of(walls[0]).scaled(1000)
        cpu_ref = Spread.of(cpu["reference"]).scaled(1000)
        for lv, samples in zip(engines, walls[1:], strict=True):
            mine = Spread.of(cpu[lv]).scaled(1000)
            out.append(Figure(f'print("hi") at {lv}', Spread.of(samples).scaled(1000), wall_ref,
                              "ms", "the reference"))
            out.append(Figure(f'CPU per print("hi") at {lv}', mine, cpu_ref, "ms",
                              "the reference"))
            out.append(Figure(f'CPU per print("hi") at {lv}', mine, cpu_pass, "ms",
                              "python -c pass CPU"))
        out.append(_round_trips_versus(config, ref, reps=reps))
        out.append(_throughput_versus(default, ref, reps=reps, cwd=cwd))
    return out


def _round_trips_versus(config: Config, ref: reference.Reference, *, reps: int) -> Figure:
    calls = 200
    ours: list[float] = []
    theirs: list[float] = []
    with noop_engine(config, "none", **{"code_execution.mode": "strict"}) as engine:
        mine = _round_trips_into(ours, engine, calls)

        def reference_calls() -> float:
            theirs.extend(json.loads(ref.run(reference.ROUND_TRIPS.format(n=calls)).outputs[0]))
            return 0.0

        interleaved(max(3, reps // 4), reference_calls, mine)
    return Figure("no-op tool round trip", Spread.of(ours).scaled(1e6),
                  Spread.of(theirs).scaled(1e6), "us", "the reference", show_p99=True)


def _throughput_versus(engine: Any, ref: reference.Reference, *, reps: int,
                       cwd: str) -> Figure:
    workers, count = 4, 16
    ref.run("pass", count=workers, workers=workers)

    def mine() -> float:
        return _rate(count, workers, lambda: _checked(
            engine.execute("pass", tools=[], mode="project", cwd=cwd), "trivial execution"))

    def theirs() -> float:
        return count / ref.run("pass", count=count, workers=workers).wall

    rates = interleaved(max(3, reps // 5), theirs, mine)
    return Figure(f"executions/s, {workers} callers ({engine.launcher.level})",
                  Spread.of(rates[1]), Spread.of(rates[0]), "exec/s", "the reference",
                  higher_better=True)


#: the fields of ``psutil.cpu_times()`` that add up to the machine's time (guest time is
#: counted in user time already)
_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def machine_during(before: Any, after: Any) -> dict[str, float]:
    """What share of the machine's CPU time (every CPU's, between two ``psutil.cpu_times()``)
    went where: ``busy`` (user, system, interrupts), ``idle`` (with I/O wait) and ``stolen``
    (the hypervisor ran something else on our virtual CPUs: figures from such a run are
    slower than the machine is). Fields a platform lacks count as zero."""
    spent = {f: max(0.0, getattr(after, f, 0.0) - getattr(before, f, 0.0)) for f in _CPU_FIELDS}
    total = sum(spent.values()) or 1.0
    idle = spent["idle"] + spent["iowait"]
    return {"busy": (total - idle - spent["steal"]) / total, "idle": idle / total,
            "stolen": spent["steal"] / total}


def run_all(*, quick: bool, config_path: str | None = None, suites: list[str] | None = None,
            json_path: str | None = None, reference_python: str | None = None,
            emit: Callable[[str], None] = print) -> int:
    """Everything ``execengine bench speed`` runs; returns an exit status. The
    **reference** suite runs when ``reference_python`` is given (all suites then include it)."""
    started = time.perf_counter()
    config = load_config(config_path) if config_path else Config()
    chosen = suites or [s for s in SUITES if s != "reference" or reference_python]
    if "reference" in chosen and not reference_python:
        reference_python = os.environ.get("EXECENGINE_BENCH_REFERENCE")
    if "reference" in chosen and not reference_python:
        raise BenchError("the reference suite needs --reference PYTHON (or "
                         "EXECENGINE_BENCH_REFERENCE): an interpreter with the reference "
                         "installed (pip install -r benchmarks/reference-requirements.txt)")
    reps = 10 if quick else 40
    levels = available_levels()
    emit(f"execengine speed benchmarks ({'quick' if quick else 'full'}, {reps} interleaved "
         f"rounds); python {sys.version.split()[0]} at {sys.executable}; levels: "
         f"{', '.join(levels)}; {os.cpu_count()} CPUs")
    runners: dict[str, Callable[[], list[Figure]]] = {
        "startup": lambda: startup(config, reps=reps, levels=levels),
        "launch": lambda: launch(config, reps=reps, levels=levels),
        "roundtrip": lambda: roundtrip(config, reps=reps),
        "concurrency": lambda: concurrency(config, reps=reps),
        "throughput": lambda: throughput(config, reps=reps),
        "scaling": lambda: scaling(config, reps=reps, quick=quick),
        "memory": lambda: memory(config, quick=quick),
        "reference": lambda: versus_reference(config, reference_python or "", reps=reps,
                                              emit=emit),
    }
    report: dict[str, list[dict[str, Any]]] = {}
    cpu_before = psutil.cpu_times()
    for name in chosen:
        emit(f"== {name}")
        figures = runners[name]()
        report[name] = [f.to_dict() for f in figures]
        for fig in figures:
            emit(fig.line())
    machine = machine_during(cpu_before, psutil.cpu_times())
    emit(f"total {time.perf_counter() - started:.1f}s; the machine's CPU time meanwhile: "
         f"busy {machine['busy']:.0%}, idle {machine['idle']:.0%}, stolen by the hypervisor "
         f"{machine['stolen']:.0%}")
    if json_path:
        Path(json_path).write_text(json.dumps({"python": sys.version.split()[0],
                                               "levels": levels, "machine": machine,
                                               "suites": report}, indent=1))
    return 0
