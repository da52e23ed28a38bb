"""The reference system (Hermes ``execute_code``) run as a baseline, on request.

``PYTHON`` in ``execengine bench speed --reference PYTHON`` is an interpreter with the
reference installed (``hermes-agent``; the version the README's figures are about is pinned
in ``benchmarks/reference-requirements.txt``), best the same Python as ours. A driver
process (:data:`DRIVER`) runs under it and runs the reference's own ``execute_code`` when
asked, so the speed suite can interleave its runs with ours. Its ``web_search`` is replaced
by a handler that returns at once (ours gets the same no-op), and its tool-call limit is
raised so a round-trip script is not cut off at its default 50 calls; nothing else of its
configuration is changed.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from execengine.errors import BenchError

#: runs under the reference's interpreter (standard library and the reference only). One
#: JSON request a line on stdin, one JSON reply a line on the descriptor given as argv[1]
#: (the reference logs to stdout and stderr; both go to stderr, which the caller keeps).
#: A request runs ``count`` executions of ``code`` on ``workers`` threads (or, with no code,
#: ``<its interpreter> -c pass``) and replies with the wall time, the CPU time of this
#: process and its reaped children, and the outputs.
DRIVER = r"""
import json, os, resource, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
replies = os.fdopen(int(sys.argv[1]), "w")
os.dup2(2, 1)
def reply(**kw):
    replies.write(json.dumps(kw) + "\n")
    replies.flush()
try:
    import model_tools
    from importlib.metadata import version
    from tools.code_execution_tool import execute_code
    from tools.registry import registry
except Exception as exc:
    reply(error="this interpreter cannot import the reference (hermes-agent): %r" % (exc,))
    sys.exit(0)
registry.register(name="web_search", toolset="web",
                  schema={"name": "web_search", "description": "no-op",
                          "parameters": {"type": "object", "properties": {}}},
                  handler=lambda args, **kw: json.dumps({"ok": True}))
check = json.loads(model_tools.handle_function_call("web_search", {"query": "q"}))
if check != {"ok": True}:
    reply(error="the no-op web_search did not take the reference's place: %r" % (check,))
    sys.exit(0)
reply(version=version("hermes-agent"), python=sys.version.split()[0],
      executable=sys.executable)
def cpu():
    used = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in used)
serial = [0]
lock = threading.Lock()
def one(code):
    with lock:
        serial[0] += 1
        task = "bench-%d" % serial[0]
    result = json.loads(execute_code(code, task_id=task, enabled_tools=["web_search"]))
    if result.get("status") != "success":
        raise RuntimeError("the reference's execution failed: %s" % (result,))
    return result.get("output", "")
def spawn():
    import subprocess
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return ""
for line in sys.stdin:
    req = json.loads(line)
    job = spawn if req["code"] is None else lambda: one(req["code"])
    try:
        c, t = cpu(), time.perf_counter()
        with ThreadPoolExecutor(req["workers"]) as pool:
            outputs = list(pool.map(lambda _: job(), range(req["count"])))
        wall = time.perf_counter() - t
        reply(wall=wall, cpu=cpu() - c, outputs=outputs)
    except Exception as exc:
        reply(error=str(exc))
"""

#: the no-op round trips of :data:`~execengine.bench.speed.ROUND_TRIPS` for the reference:
#: its generated ``web_search`` takes a query
ROUND_TRIPS = """
import json, time
from hermes_tools import web_search
web_search("q")
t = []
for _ in range({n}):
    t0 = time.perf_counter()
    web_search("q")
    t.append(time.perf_counter() - t0)
print(json.dumps(t))
"""


@dataclass(frozen=True)
class Run:
    """What the driver measured for one request."""

    wall: float
    cpu: float
    outputs: list[str]


class Reference:
    """A driver process running the reference's ``execute_code`` on request."""

    def __init__(self, python: str) -> None:
        if not os.access(python, os.X_OK):
            raise BenchError(f"--reference {python}: not an executable interpreter")
        self._home = tempfile.TemporaryDirectory(prefix="execengine-reference-")
        Path(self._home.name, "config.yaml").write_text(
            "code_execution:\n  max_tool_calls: 1000000\n  timeout: 600\n", encoding="utf-8")
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (kept until close())
        read, write = os.pipe()
        # its scripts run on this interpreter: not on an active virtual environment's
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("HERMES_") and k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
        env["HERMES_HOME"] = self._home.name
        try:
            self._proc = subprocess.Popen(
                [python, "-c", DRIVER, str(write)], stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=self._stderr, pass_fds=(write,),
                cwd=self._home.name, env=env, text=True)
        except OSError as exc:
            os.close(read)
            os.close(write)
            self._stderr.close()
            self._home.cleanup()
            raise BenchError(f"--reference {python}: {exc.strerror}") from exc
        os.close(write)
        self._replies = os.fdopen(read, "r", encoding="utf-8")
        try:
            hello = self._reply()
        except BaseException:
            self.close()
            raise
        self.version: str = hello["version"]
        self.python: str = hello["python"]

    def _reply(self) -> dict[str, Any]:
        line = self._replies.readline()
        if not line:
            self._stderr.seek(0)
            tail = self._stderr.read().decode("utf-8", "replace").strip().splitlines()[-5:]
            raise BenchError("the reference's driver ended without a reply"
                             + (":\n  " + "\n  ".join(tail) if tail else ""))
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise BenchError(f"reference: {reply['error']}")
        return reply

    def run(self, code: str | None, *, count: int = 1, workers: int = 1) -> Run:
        """``count`` executions of ``code`` by the reference on ``workers`` threads; with
        ``code`` None, ``count`` starts of the reference's interpreter (``-c pass``)."""

        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps({"code": code, "count": count,
                                               "workers": workers}) + "\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass  # the driver is gone: the reply it did not write says so, with its stderr
        r = self._reply()
        return Run(r["wall"], r["cpu"], r["outputs"])

    def __enter__(self) -> Reference:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._replies.close()
        self._stderr.close()
        self._home.cleanup()
