"""Red team (issue 39, item 6): host CPU after the script ends.

A script makes a 1000 MB sparse file (a text start, then one line with no end: the rest is
a hole) and fires 50 ``read_file(path, offset=2)`` calls from threads, then exits. The
file tools run on the host: each call read the whole gigabyte of NULs to find line 2, and
the host burned about a minute of CPU after the script had ended. Now a hole is jumped
(:mod:`execengine.fileops.scan`), every call's reading is bounded by a byte budget and a
deadline, and the reading stops when the execution that made the call ends (its
CallContext interrupt).

Measured here as this process's CPU time (the engine runs in it) from the moment the result
is back until the process goes quiet: a fixed engine is quiet at once (well under a
second), the old one burned tens of seconds. Level ``none`` only: the tools run on the host
whatever the level.
"""

from __future__ import annotations

import json
import threading
import time

from execengine.config import Config
from execengine.engine.core import Engine
from execengine.fileops.ops import FileSettings
from execengine.fileops.paths import Scope
from execengine.fileops.reading import read_file

SCRIPT = """
import os, threading
from hermes_tools import read_file
path = os.path.abspath("sparse.txt")
with open(path, "wb") as fh:
    fh.write(b"first line\\n" + b"x" * 9000)  # text for the binary sniff, then no newline
    fh.truncate(1000 * 1024 * 1024)
threads = [threading.Thread(target=read_file, args=(path,), kwargs={"offset": 2},
                            daemon=True) for _ in range(50)]
for t in threads:
    t.start()
deadline = __import__("time").monotonic() + 1.5
for t in threads:
    t.join(max(0.0, deadline - __import__("time").monotonic()))
print("fired", sum(t.is_alive() for t in threads), "still waiting")
"""


def _cpu_until_quiet(limit: float = 20.0) -> float:
    """This process's CPU seconds from now until a second passes with under a quarter of
    a second of CPU (or ``limit`` seconds)."""
    start = time.process_time()
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        before = time.process_time()
        time.sleep(1.0)
        if time.process_time() - before < 0.25:
            break
    return time.process_time() - start


def test_no_host_cpu_after_the_script_ends(tmp_path):
    config = Config().with_overrides({
        "code_execution.isolation": "none", "code_execution.timeout": 30,
        "approvals.mode": "allow"})
    with Engine(config) as engine:
        result = engine.execute(SCRIPT, cwd=str(tmp_path))
        assert result.status == "success" and "fired" in result.output, result
        burned = _cpu_until_quiet()
    assert burned < 4.0, f"the host burned {burned:.1f} s of CPU after the script ended"


def test_a_sparse_gigabyte_costs_what_it_holds(tmp_path):
    # the bound itself, without an execution: the same call the script made, on the host
    path = tmp_path / "sparse.txt"
    with open(path, "wb") as fh:
        fh.write(b"first line\n" + b"x" * 9000)
        fh.truncate(1000 * 1024 * 1024)
    started = time.process_time()
    with Scope.for_call(Config(), str(tmp_path), None) as scope:
        out = read_file(scope, {"path": str(path), "offset": 2}, FileSettings())
    assert time.process_time() - started < 2.0
    # the answer is the one reading it whole gave: line 2 is cut, its length counted
    assert out["total_lines"] == 2 and out["long_lines"] == [2], out
    assert f"{9000 + 1000 * 1024 * 1024 - 9011} characters" in out["content"], out["hint"]


def test_a_call_of_an_ended_execution_stops_reading(tmp_path):
    # a dense file the scan must really read; the interrupt is set before the call (the
    # execution already ended) or while it reads
    path = tmp_path / "dense.txt"
    path.write_bytes(b"a\n" * (8 * 1024 * 1024))
    ended = threading.Event()
    ended.set()
    with Scope.for_call(Config(), str(tmp_path), None) as scope:
        out = read_file(scope, {"path": str(path), "offset": 2}, FileSettings(interrupt=ended))
        assert "has ended" in out.get("error", ""), out
        # negative control: the same call of a running execution reads and counts it all
        out = read_file(scope, {"path": str(path), "offset": 2},
                        FileSettings(interrupt=threading.Event()))
    assert out["total_lines"] == 8 * 1024 * 1024 and "error" not in out, json.dumps(out)[:300]
