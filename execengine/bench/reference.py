"""The reference system (Hermes ``execute_code``) run as a baseline, on request.

``PYTHON`` in ``execengine bench speed --reference PYTHON`` is an interpreter with the
reference installed (``hermes-agent``; the version the README's figures are about is pinned
in ``benchmarks/reference-requirements.txt``). A driver process (:data:`DRIVER`) runs under
it and runs the reference's own ``execute_code`` when asked, so the speed suite can
interleave its runs with ours. Its ``web_search`` is replaced by a handler that returns at
once (ours gets the same no-op), and its tool-call limit is raised so a round-trip script
is not cut off at its default 50 calls; nothing else of its configuration is changed.

**One interpreter and site for both.** A script's start is most of a trivial execution, and
what a start costs depends on the interpreter and its ``site`` (a virtual environment's own
``site-packages`` and every ``.pth`` file in it run at each start): the suite compares the
engines only when both children start the same interpreter with the same ``site``. So our
side of the suite runs in a process of ``PYTHON`` too (:func:`same_interpreter`; the speed
suite starts one when it runs elsewhere, :func:`under`), its children start that
interpreter, and before anything else the two engines' ``<child interpreter> -c pass`` are
timed, interleaved: :func:`agreed_floors` refuses to go on when they differ by more than
:data:`FLOOR_TOLERANCE`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from execengine.bench.stats import Spread, interleaved
from execengine.errors import BenchError

#: how far apart the two engines' ``python -c pass`` may be for the suite to compare them
FLOOR_TOLERANCE = 0.10
#: times the floors are measured before the suite gives up (a noisy phase of the machine
#: can pull two medians of one interpreter apart; a different site stays apart)
FLOOR_TRIES = 3

#: runs under the reference's interpreter (standard library and the reference only). One
#: JSON request a line on stdin, one JSON reply a line on the descriptor given as argv[1]
#: (the reference logs to stdout and stderr; both go to stderr, which the caller keeps).
#: A request runs ``count`` executions of ``code`` on ``workers`` threads (or, with no code,
#: ``<the interpreter its scripts start> -c pass``) and replies with the wall time, the CPU
#: time of this process and its reaped children, and the outputs.
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
try:  # the interpreter its scripts start: its own, unless its mode picks a virtualenv's
    from tools.code_execution_tool import _get_execution_mode, _resolve_child_python
    child = _resolve_child_python(_get_execution_mode())
except Exception:
    child = sys.executable
reply(version=version("hermes-agent"), python=sys.version.split()[0],
      executable=sys.executable, prefix=sys.prefix, child=child)
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
    subprocess.run([child, "-c", "pass"], check=True)
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
        python = interpreter_path(python)  # the driver starts in a folder of its own
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
        #: its ``sys.prefix`` (the virtual environment), and the interpreter its scripts start
        self.prefix: str = hello["prefix"]
        self.child: str = hello["child"]

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
        ``code`` None, ``count`` starts of the interpreter its scripts start (``-c pass``)."""

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


def interpreter_path(python: str) -> str:
    """``python`` as an absolute path: a relative one is the caller's (the suite starts it
    from folders of its own), a bare name is looked up on ``PATH``. Links are kept: a
    virtual environment's interpreter is a link whose folder names the environment."""
    if os.sep not in python:
        return shutil.which(python) or python
    return os.path.abspath(python)


def same_interpreter(python: str) -> bool:
    """Whether ``python`` is the interpreter running here, with the same site: the same
    program, started from the same folder (a virtual environment is found next to the
    program as named, not as resolved)."""
    here = os.path.abspath(sys.executable)
    there = os.path.abspath(python)
    return (os.path.dirname(here) == os.path.dirname(there)
            and os.path.realpath(here) == os.path.realpath(there))


def under(python: str, module: str, function: str, *args: str) -> list[str]:
    """The command running ``module.function(*args)`` (its return value the exit status)
    in a process of ``python``, with this very copy of execengine first on its path (the
    reference's virtual environment sees ours through ``--system-site-packages``, which may
    be another copy: an editable install's checkout, say)."""
    root = str(Path(__file__).resolve().parents[2])
    code = (f"import sys; sys.path.insert(0, {root!r}); from {module} import {function}; "
            f"sys.exit({function}(*sys.argv[1:]))")
    return [python, "-c", code, *args]


def agreed_floors(ours: Callable[[], float], theirs: Callable[[], float], *, rounds: int,
                  emit: Callable[[str], None], tolerance: float = FLOOR_TOLERANCE,
                  tries: int = FLOOR_TRIES) -> tuple[Spread, Spread]:
    """Our floor and the reference's (each a sample function returning seconds: one
    ``<child interpreter> -c pass``), interleaved, ``rounds`` rounds, in ms. Both are
    printed; while their medians differ by more than ``tolerance`` they are measured
    again, and after ``tries`` the suite is refused (:class:`BenchError`): its ratios would
    compare two interpreters' start-up, not the engines."""
    gap = 0.0
    for attempt in range(1, tries + 1):
        walls = interleaved(rounds, theirs, ours)
        mine, ref = Spread.of(walls[1]).scaled(1000), Spread.of(walls[0]).scaled(1000)
        gap = mine.median / ref.median - 1
        emit(f"floors ({attempt}/{tries}): python -c pass, our child's interpreter "
             f"{mine.median:.2f} ms (min {mine.min:.2f}, p90 {mine.p90:.2f}), the "
             f"reference's {ref.median:.2f} ms (min {ref.min:.2f}, p90 {ref.p90:.2f}): "
             f"{gap:+.1%}")
        if abs(gap) <= tolerance:
            return mine, ref
    raise BenchError(
        f"refused: the two engines' interpreters start {abs(gap):.0%} apart (python -c pass, "
        f"more than {tolerance:.0%}, {tries} times), so a ratio would compare interpreters "
        "and their site, not the engines: run ours on the reference's interpreter (execengine "
        "importable from its venv, made with --system-site-packages) and check that its "
        "scripts start that interpreter")
