"""Red team (issue 39, item 4): a session cell forged its end; a leftover thread called in
the next cell.

* **The forger**: a cell finds its end marker in the kernel's frames, writes it with a
  forged result and a ``done`` reply, and keeps running: the host took the cell as ended,
  and the forger answered the next cell in its place (that cell's code never ran, its
  "output" was the forger's). The end of a cell is now the host's to decide: only a
  ``done`` with the cell's end secret counts, and the kernel takes that secret only after
  the cell's code has returned. So the first result comes back only once the forger's code
  is over, and the next cell runs its own code.
* **The leftover thread**: a thread cell 1 started waits for cell 2, resets the client's
  call gate (``call_gate = None``, the kernel's list of stale threads emptied) and calls
  ``write_file``: the host accepted it, although such calls are documented as refused. Each
  cell now has a call credential the host checks; the thread holds cell 1's. Negative
  control: a thread cell 2 starts makes the same call in cell 2 and it is accepted (the
  probe's write does reach the host).

Every level: the checks are the host's, the same at each.
"""

from __future__ import annotations

import json

import pytest

from execengine.config import Config
from execengine.engine.core import Engine

from .conftest import level_params

LEVEL = level_params()


def _engine(level: str) -> Engine:
    return Engine(Config().with_overrides({
        "code_execution.isolation": level, "code_execution.min_isolation": level,
        "code_execution.timeout": 40.0, "code_execution.kill_grace": 0.5,
        "code_execution.mode": "project", "approvals.execute_code": "allow"}))


FORGER = r'''
import os, sys, time
kernel = marker = None
cell = 0
f = sys._getframe()
while f is not None:  # the runtime's frames: its Kernel, the cell's number and marker
    here = f.f_locals
    if marker is None and isinstance(here.get("marker"), (bytes, str)):
        marker = here["marker"]
    if isinstance(here.get("msg"), dict):
        cell = here["msg"].get("cell", cell)
        marker = marker or here["msg"].get("marker")
    if kernel is None and hasattr(here.get("self"), "reply_fd"):
        kernel = here["self"]
    f = f.f_back
as_bytes = lambda m: m.encode() if isinstance(m, str) else (m or b"")

def forge(number, mark, text):
    os.write(1, text.encode() + as_bytes(mark))
    os.write(2, as_bytes(mark))
    kernel.send({"op": "done", "cell": number, "status": "ok", "code": 0})

forge(cell, marker, "FORGED-1\n")
deadline = time.monotonic() + 4  # keep running: answer the next cell in its place
while time.monotonic() < deadline:
    if kernel.cells:
        nxt = kernel.cells.pop(0)
        forge(nxt.get("cell"), nxt.get("marker"), "FORGED-2\n")
        break
    time.sleep(0.005)
open("forger-returned", "w").close()
'''


@pytest.mark.parametrize("level", LEVEL)
def test_a_cell_cannot_forge_its_end_or_answer_the_next(level, tmp_path):
    with _engine(level) as engine:
        first = engine.execute(FORGER, session="s", cwd=str(tmp_path))
        # the host's result only once the forger's code had returned
        returned_before = (tmp_path / "forger-returned").exists()
        second = engine.execute("print('REAL-' + '2')", session="s", cwd=str(tmp_path))
    assert returned_before, first
    assert first.status == "success", first
    assert second.status == "success" and second.output.strip() == "REAL-2", second


LEFTOVER = r'''
import os, sys, threading, time, json
from hermes_tools import write_file

def later():
    while not os.path.exists("cell-2-running"):
        time.sleep(0.01)
    # take the next cell's authority back, as far as the kernel's own checks go
    sys.modules["_execengine.client"].call_gate = None
    sys.modules["_execengine.kernel"]._state.stale.clear()
    try:
        out = write_file(path="written-by-leftover", content="late")
    except Exception as exc:
        out = {"raised": f"{type(exc).__name__}: {exc}"}
    with open("leftover.json", "w") as fh:
        json.dump(out, fh)

threading.Thread(target=later, daemon=True).start()
print("cell 1 done")
'''

CELL_2 = r'''
import os, threading, time, json
from hermes_tools import write_file
open("cell-2-running", "w").close()
deadline = time.monotonic() + 25
while not os.path.exists("leftover.json") and time.monotonic() < deadline:
    time.sleep(0.01)
print(open("leftover.json").read() if os.path.exists("leftover.json") else "NO ANSWER")
# the negative control: a thread of this cell makes the same call, and it goes through
box = {}
t = threading.Thread(target=lambda: box.update(
    out=write_file(path="written-by-cell-2", content="ok")))
t.start()
t.join(20)
print(json.dumps(box.get("out")))
'''


@pytest.mark.parametrize("level", LEVEL)
def test_a_leftover_thread_gets_no_tool_call_in_the_next_cell(level, tmp_path):
    with _engine(level) as engine:
        first = engine.execute(LEFTOVER, session="s", cwd=str(tmp_path))
        second = engine.execute(CELL_2, session="s", cwd=str(tmp_path))
    assert first.status == "success", first
    assert second.status == "success", second
    lines = second.output.strip().splitlines()
    answer = json.loads(lines[0])
    assert not (tmp_path / "written-by-leftover").exists(), answer
    assert "error" in answer or "raised" in answer, answer
    assert (tmp_path / "written-by-cell-2").read_text() == "ok", lines  # negative control


HIJACKER = r'''
import sys
Kernel = sys.modules["_execengine.kernel"].Kernel
real_run = Kernel.run

def run(self, msg):  # every later cell runs this code instead, with its own secrets
    real_run(self, {**msg, "code": "print('HIJACKED'); open('hijacked', 'w').close()"})

Kernel.run = run
print("planted")
'''


@pytest.mark.xfail(strict=True, reason=(
    "open (deep design): a cell's code runs in the kernel's own process, so it can replace "
    "the kernel's code (here Kernel.run) and every later cell of the session runs the "
    "attacker's code under that cell's own end secret and call credential; the host "
    "cannot tell. The per-cell secrets stop a cell that forges its end while it keeps "
    "running, not one that rewrites the runtime for the cells after it"))
@pytest.mark.parametrize("level", LEVEL)
def test_a_cell_cannot_rewrite_the_kernel_for_the_next_cells(level, tmp_path):
    """Negative control built in: the first cell's plant does run (``planted``), so the
    probe is live; the second cell must run its own code and nothing of the plant."""
    with _engine(level) as engine:
        first = engine.execute(HIJACKER, session="s", cwd=str(tmp_path))
        assert "planted" in first.output, (first.error, first.stderr)
        second = engine.execute("print('REAL')", session="s", cwd=str(tmp_path))
    assert second.output.strip() == "REAL", second.output
    assert not (tmp_path / "hijacked").exists()
