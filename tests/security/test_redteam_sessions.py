"""Red team: a hostile cell against its session kernel and the host.

* **Output after the end marker**: a cell can find its own cell's end marker (by
  searching the runtime's closures for its end secret) and write it early, then flood
  stdout: the host keeps every byte after the marker for the next cell. That must stay
  bounded on the host.
* **A process a cell's leftover thread starts after the cell ended** (so the cell's own
  end did not kill it): closing the session, and the idle reaper, must end it.
* **Two callers on one session**: both get exactly one result, one after the other.
* **reset** and **another session** see none of a session's variables.

Every level runs; the negative controls are host-side (the flood reached the host, the
process did outlive its cell, the variable is there for the same session).
"""

from __future__ import annotations

import os
import secrets
import threading
import tracemalloc

import psutil
import pytest

from execengine.config import Config
from execengine.engine.core import Engine

from .conftest import level_params, wait_until

LEVEL = level_params()


def _engine(level: str, **over: object) -> Engine:
    cfg = Config().with_overrides({
        "code_execution.isolation": level, "code_execution.min_isolation": level,
        "code_execution.timeout": 30.0, "code_execution.kill_grace": 0.5,
        "code_execution.mode": "strict", "approvals.execute_code": "allow",
        **{f"code_execution.{k}": v for k, v in over.items()}})
    return Engine(cfg)


# the marker is no longer in the cell's frames (its end secret is taken after the cell's
# code returns: test_redteam_cell_end.py); code that searches the runtime's closures still
# finds it, and what it writes past the marker must stay bounded on the host
FLOOD_AFTER_MARKER = """
import os, sys
finish = sys.modules["_execengine.kernel"]._finish
ends = next(c.cell_contents for c in finish.__closure__
            if isinstance(c.cell_contents, dict))
cell = max(ends)
os.write(1, ("\\0execengine-cell-%d-%s\\0" % (cell, ends[cell])).encode())
chunk = b"A" * 65536
for _ in range({chunks}):
    os.write(1, chunk)
"""


@pytest.mark.parametrize("level", LEVEL)
def test_output_after_the_end_marker_is_bounded_on_the_host(level):
    flood = 48 << 20
    with _engine(level) as engine:
        tracemalloc.start()
        try:
            first = engine.execute(FLOOD_AFTER_MARKER.format(chunks=flood >> 16),
                                   session="s")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        second = engine.execute("print('second')", session="s")
    for spilled in (first.full_output_path, second.full_output_path):
        if spilled:  # the flood's spill file: the test leaves nothing in the temp dir
            os.unlink(spilled)
    assert first.status == "success", (first.status, first.error, first.stderr[-500:])
    # negative control: the flood got past the marker to the host (into the next cell)
    assert second.status == "success", (second.error, second.stderr[-500:])
    assert second.output.startswith("AAAA"), second.output[:100]
    assert peak < 24 << 20, f"the host held {peak >> 20} MiB of a cell's stray output"


#: the thread waits for the host's word that the cell is over: the test makes ``go`` in
#: the session's working directory once the result is back (the kernel's and the host's
#: sweeps of the cell are done then)
LEFTOVER_PROCESS = """
import os, subprocess, threading, time
go = os.path.join(os.getcwd(), "go")
def later():
    deadline = time.monotonic() + 20
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.005)
    subprocess.Popen(["sleep", "{marker}"], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
threading.Thread(target=later, daemon=True).start()
print(go)
"""


def _sleepers(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if marker in (proc.info["cmdline"] or []) and \
                    proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


@pytest.mark.parametrize("how", ["close_session", "idle_reaper", "reset", "engine_close"])
@pytest.mark.parametrize("level", LEVEL)
def test_a_process_started_after_its_cell_dies_with_the_session(level, how):
    marker = str(4000 + secrets.randbelow(10 ** 6))  # a number sleep accepts
    idle = 4.0 if how == "idle_reaper" else 1800.0
    engine = _engine(level, session_idle_timeout=idle)
    try:
        r = engine.execute(LEFTOVER_PROCESS.format(marker=marker), session="s")
        assert r.status == "success", (r.error, r.stderr)
        go = r.output.strip()
        assert os.path.isdir(os.path.dirname(go)), r.output  # the host's view of it
        with open(go, "w"):
            pass
        # negative control: the process outlived the cell that made it
        assert wait_until(lambda: _sleepers(marker), 20.0), "the probe started nothing"
        if how == "close_session":
            assert engine.sessions.close_session("s")
        elif how == "reset":
            assert engine.execute("print(1)", session="s", reset=True).status == "success"
        elif how == "engine_close":
            engine.close()
        assert wait_until(lambda: not _sleepers(marker), 10.0), _sleepers(marker)
    finally:
        engine.close()
        for proc in _sleepers(marker):
            proc.kill()


@pytest.mark.parametrize("level", LEVEL)
def test_state_does_not_cross_reset_or_sessions(level):
    with _engine(level) as engine:
        assert engine.execute("x = 'kept-' + 'value'", session="a").status == "success"
        same = engine.execute("print(globals().get('x', 'NOTHING'))", session="a")
        other = engine.execute("print(globals().get('x', 'NOTHING'))", session="b")
        reset = engine.execute("print(globals().get('x', 'NOTHING'))", session="a",
                               reset=True)
    assert same.output.strip() == "kept-value", same  # negative control
    assert other.output.strip() == "NOTHING", other
    assert reset.output.strip() == "NOTHING", reset


@pytest.mark.parametrize("level", LEVEL)
def test_two_callers_on_one_session_get_one_result_each(level):
    results: dict[int, object] = {}
    with _engine(level) as engine:
        engine.execute("n = 0", session="s")

        def call(i: int) -> None:
            results[i] = engine.execute("n += 1\nprint(n)", session="s")

        threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        final = engine.execute("print(n)", session="s")
    assert sorted(results) == [0, 1, 2, 3]
    outs = sorted(int(r.output.strip()) for r in results.values())  # type: ignore[attr-defined]
    assert outs == [1, 2, 3, 4], outs  # one at a time: no lost update, no double run
    assert final.output.strip() == "4"
