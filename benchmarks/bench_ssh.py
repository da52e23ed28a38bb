"""Remote execution over SSH on loopback: what a tool call and a warm execution cost.

    sudo python benchmarks/bench_ssh.py [--quick] [--json PATH]

Starts its own sshd on 127.0.0.1 with a throwaway user (as tests/remote does; needs root
and openssh-server), then measures, interleaved with their baselines:

- **no-op tool call** from a script running on the remote, through the forwarded socket
  (timed inside the script, per call), against a raw round trip of the same connection:
  one line echoed by ``cat`` on a channel of it;
- **print("hi")** with a warm connection (the runtime installed), end to end from
  ``Engine.execute``, against ``ssh host python3 -c pass`` over the same multiplexed
  connection;
- **read_file** of a small remote file from the host (the file tools' channel) against
  the same raw echo round trip.

Targets (issue 19): tool call median <= 2 ms; print("hi") <= 1.5x the bare ssh command.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from execengine.bench.speed import ROUND_TRIPS, noop_engine
from execengine.bench.stats import Figure, Spread, interleaved, timed
from execengine.config import Config
from execengine.host.ssh import SshHost
from execengine.remote.ssh import quote
from tests.remote.sshd import available, loopback_remote


class Echo:
    """A ``cat`` on one channel of the connection: a raw round trip over it."""

    def __init__(self, host: SshHost) -> None:
        argv = host.connection.command("exec cat")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def round_trip(self) -> float:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        t0 = time.perf_counter()
        self.proc.stdin.write(b'{"v":1,"type":"call","id":"1","tool":"web_search"}\n')
        self.proc.stdin.flush()
        self.proc.stdout.readline()
        return time.perf_counter() - t0

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(10)
        self.proc.stdout.close()


def measure(overrides: dict[str, object], *, reps: int, calls: int) -> list[Figure]:
    config = Config().with_overrides(overrides)
    with noop_engine(config) as engine:
        host = engine.host
        engine.execute("print('warm')")  # connect, install the runtime
        echo = Echo(host)
        tool: list[float] = []
        raw: list[float] = []

        def script() -> float:
            r = engine.execute(ROUND_TRIPS.format(n=calls))
            if r.status != "success":
                raise RuntimeError(f"the round-trip script failed: {r.error} {r.stderr}")
            tool.extend(json.loads(r.output))
            return 0.0

        def echoes() -> float:
            raw.extend(echo.round_trip() for _ in range(calls))
            return 0.0

        interleaved(max(3, reps // 4), script, echoes)

        def hi() -> float:
            return timed(lambda: _ok(engine.execute("print('hi')")))

        bare_cmd = quote([config.ssh.python, "-c", "pass"])
        printed, bare = interleaved(reps, hi, lambda: timed(
            lambda: host.connection.check(bare_cmd)))

        files = host.files
        path = f"{host.home()}/bench.txt"
        host.connection.check(f"printf 'a\\nb\\n' > {quote([path])}")
        from execengine.fileops.ops import FileSettings

        def read() -> float:
            return timed(lambda: files.call("read_file", {"path": path}, cwd=host.home(),
                                           denied=[], settings=FileSettings()))

        reads, raw2 = interleaved(reps * 5, read, echo.round_trip)
        echo.close()
    return [
        Figure("no-op tool call (remote script)", Spread.of(tool).scaled(1000),
               Spread.of(raw).scaled(1000), "ms", "raw echo on the connection"),
        Figure('print("hi"), warm connection', Spread.of(printed).scaled(1000),
               Spread.of(bare).scaled(1000), "ms", "ssh host python3 -c pass"),
        Figure("read_file from the host", Spread.of(reads).scaled(1000),
               Spread.of(raw2).scaled(1000), "ms", "raw echo on the connection"),
    ]


def _ok(result: object) -> None:
    if getattr(result, "status", None) != "success":
        raise RuntimeError(f"the script failed: {result}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--json", metavar="PATH", help="also write the figures here")
    args = ap.parse_args()
    if not available():
        print("needs root and sshd (apt-get install openssh-server)", file=sys.stderr)
        return 2
    reps, calls = (10, 100) if args.quick else (40, 500)
    with loopback_remote() as remote:
        os.environ.pop("EXECENGINE_CONFIG", None)
        figures = measure(dict(remote.overrides(**{"code_execution.max_tool_calls": 5000})),
                          reps=reps, calls=calls)
    for f in figures:
        print(f.line())
    if args.json:
        Path(args.json).write_text(json.dumps([f.to_dict() for f in figures], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
