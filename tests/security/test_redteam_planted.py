"""Modules a script leaves in its working directory for the next execution there.

``python -c`` puts the working directory first on ``sys.path``, and the child runtime starts
as ``python -c ENTRY``: before ``ENTRY`` took that entry out, an ``_execengine/`` package (or
a ``types.py``, which the bootstrap imports before the script) left in a shared working
directory ran in every later execution there before its script, with its RPC token, and
the host reported what it printed as the script's output. A script plants them; the next
execution (a one-shot script, a session's kernel) must run its own code and nothing of
them. Project mode put the project directory on ``PYTHONPATH``, where a ``sitecustomize.py``
ran at every start: now the runtime puts it last on ``sys.path``, and never takes from it
a module the standard library only probes for (a red team's ``msvcrt.py`` ran in the next
script's ``import subprocess``, ``org/`` in ``import dataclasses``). The negative control
runs the runtime the way it used to start, in the same planted folder: the planted modules
run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from execengine._resources import sandbox_dir
from execengine._runtime import RUNTIME_PACKAGE

from .conftest import level_engine, level_params

LEVEL = level_params()

#: what each planted module does when imported: leaves a mark, and the bootstrap pretends
#: the script ran
PLANT = r'''
import os
mark = "import os\nopen(os.path.join(os.getcwd(), 'RAN-' + __name__), 'w').close()\n"
os.makedirs("_execengine", exist_ok=True)
os.makedirs("org", exist_ok=True)
for name in ("_execengine/__init__.py", "types.py", "json.py", "socket.py", "select.py",
             "hermes_tools.py", "sitecustomize.py", "msvcrt.py", "winreg.py", "_winapi.py",
             "_dbm.py", "_gdbm.py", "org/__init__.py"):
    with open(name, "w") as f:
        f.write(mark)
with open("_execengine/bootstrap.py", "w") as f:
    f.write(mark + "def main():\n    print('hijacked')\n    return 0\n")
print("planted")
'''

NEXT = """
import json, subprocess, copy, dataclasses, mimetypes, dbm, os
mimetypes.init()
try:  # the build may lack both: then dbm.dumb, never the planted ones
    dbm.open(os.path.join(os.environ["TMPDIR"], "db"), "c").close()
except Exception:
    pass
from hermes_tools import read_file
print(json.dumps({"mine": True, "read": "content" in read_file("mine.txt")}))
"""


def _marks(work) -> list[str]:
    return sorted(p.name for p in work.iterdir() if p.name.startswith("RAN-"))


@pytest.mark.parametrize("level", LEVEL)
def test_a_module_left_in_the_working_directory_never_runs_before_the_next_script(
        level, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    work.chmod(0o777)  # the slot uids may write it (as a shared batch folder would be)
    (work / "mine.txt").write_text("mine\n")
    with level_engine(level) as engine:
        first = engine.execute(PLANT, cwd=str(work))
        assert first.status == "success" and first.output == "planted\n", first
        assert (work / "_execengine" / "bootstrap.py").exists()
        nxt = engine.execute(NEXT, cwd=str(work))
    assert nxt.status == "success", (nxt.error, nxt.output, nxt.stderr)
    assert json.loads(nxt.output) == {"mine": True, "read": True}, nxt.output
    assert _marks(work) == [], nxt.output


@pytest.mark.parametrize("level", LEVEL)
def test_a_session_kernel_imports_nothing_planted_and_its_cells_still_see_the_folder(
        level, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    work.chmod(0o777)
    (work / "mine.txt").write_text("mine\n")
    (work / "helper_mod.py").write_text("VALUE = 42\n")  # a cell may import the folder's
    with level_engine(level) as engine:
        assert engine.execute(PLANT, cwd=str(work)).output == "planted\n"
        cell = engine.execute(NEXT + "import helper_mod\nprint(helper_mod.VALUE)\n",
                              cwd=str(work), session="s")
        again = engine.execute("import types, socket\nprint(types.__file__ != None)",
                               cwd=str(work), session="s")
    assert cell.status == "success", (cell.error, cell.output, cell.stderr)
    lines = cell.output.splitlines()
    assert json.loads(lines[0]) == {"mine": True, "read": True} and lines[1] == "42", lines
    assert again.status == "success" and again.output == "True\n", again
    assert _marks(work) == [], cell.output


def test_negative_control_the_old_entry_runs_the_planted_bootstrap(tmp_path):
    """The probe can see the hijack: the runtime started as it was before (``-c`` with the
    working directory first), in the planted folder, runs the planted bootstrap; started
    as now, the real one."""
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run([sys.executable, "-c", PLANT], cwd=work, check=True,
                   capture_output=True)
    script = tmp_path / "script.py"
    script.write_text("print('the script')\n")
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    os.symlink(sandbox_dir(), runtime / RUNTIME_PACKAGE)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "PYTHONPATH": os.pathsep.join([str(runtime), str(work)])}  # as project mode was
    old = f"import sys; from {RUNTIME_PACKAGE}.bootstrap import main; sys.exit(main())"
    was = subprocess.run([sys.executable, "-c", old, str(script)], cwd=work, env=env,
                         capture_output=True, text=True, timeout=60)
    assert was.stdout == "hijacked\n", was
    assert {"RAN-_execengine.bootstrap", "RAN-sitecustomize"} <= set(_marks(work)), was
    for mark in work.glob("RAN-*"):
        mark.unlink()
    from execengine.engine.prepare import BOOTSTRAP_ENTRY, PROJECT_DIR_VAR

    (work / "helper_mod.py").write_text("VALUE = 42\n")
    script.write_text("import json, helper_mod\nprint(json.dumps(helper_mod.VALUE))\n")
    env = {**env, "PYTHONPATH": str(runtime), PROJECT_DIR_VAR: str(work)}
    now = subprocess.run([sys.executable, "-c", BOOTSTRAP_ENTRY, str(script)], cwd=work,
                         env=env, capture_output=True, text=True, timeout=60)
    assert now.stdout == "42\n" and _marks(work) == [], now
