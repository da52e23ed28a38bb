"""What confinement costs: a script's ``terminal("true")`` at each level (sandboxed at
``restricted`` and ``isolated``, on the host at ``none``), and the allow-list proxy's
overhead per request against the same loopback server fetched directly.

    python benchmarks/bench_confine.py [--calls N]
"""

from __future__ import annotations

import argparse
import http.server
import json
import statistics
import tempfile
import threading
import time
import urllib.request

from execengine.config import Config
from execengine.confine.domains import DomainPolicy
from execengine.confine.proxy import AllowListProxy
from execengine.engine import Engine
from execengine.isolation import detect

LEVELS = ("none", "restricted", "isolated")

SCRIPT = """
import json, time
from hermes_tools import terminal
terminal("true")  # warm-up
samples = []
for _ in range({calls}):
    t = time.perf_counter()
    r = terminal("true")
    samples.append(time.perf_counter() - t)
    assert r["exit_code"] == 0, r
print(json.dumps(samples))
"""


def _ms(samples: list[float]) -> tuple[float, float]:
    s = sorted(samples)
    return statistics.median(s) * 1000, s[max(0, int(len(s) * 0.9) - 1)] * 1000


def terminal_latency(calls: int) -> None:
    report = detect()
    print(f"terminal(\"true\") from a script, {calls} calls (median / p90):")
    with tempfile.TemporaryDirectory() as cwd:
        for level in LEVELS:
            if not report.levels.get(level):
                continue
            cfg = Config().with_overrides({"code_execution.isolation": level,
                                           "code_execution.max_tool_calls": calls + 5})
            with Engine(cfg) as engine:
                r = engine.execute(SCRIPT.format(calls=calls), cwd=cwd)
            samples = json.loads(r.output.strip().splitlines()[-1])
            med, p90 = _ms(samples)
            where = "host shell" if level == "none" else "sandboxed"
            print(f"  {level:<11}{med:8.1f} ms {p90:8.1f} ms   ({where})")


def proxy_overhead(requests: int) -> None:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"x" * 1024
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with AllowListProxy(DomainPolicy.of(["localhost"], [])) as proxy:
            via = urllib.request.build_opener(
                urllib.request.ProxyHandler({"http": proxy.url}))
            rows = []
            for name, opener, host in (("direct", direct, "127.0.0.1"),
                                       ("via proxy", via, "localhost")):
                opener.open(f"http://{host}:{port}/").read()
                samples = []
                for _ in range(requests):
                    t = time.perf_counter()
                    opener.open(f"http://{host}:{port}/", timeout=10).read()
                    samples.append(time.perf_counter() - t)
                rows.append((name, _ms(samples)))
    finally:
        server.shutdown()
        server.server_close()
    print(f"\nallow-list proxy, {requests} GETs of 1 KiB from a loopback server (median / p90):")
    for name, (med, p90) in rows:
        print(f"  {name:<11}{med:8.2f} ms {p90:8.2f} ms")
    print(f"  overhead   {rows[1][1][0] - rows[0][1][0]:8.2f} ms per request "
          "(a new upstream connection each time, name resolved and vetted)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20)
    args = ap.parse_args()
    terminal_latency(args.calls)
    proxy_overhead(args.calls * 5)


if __name__ == "__main__":
    main()
