"""An engine still open when its interpreter exits is closed then, and one closed from an
``atexit`` handler closes cleanly: either way nothing is left (issue 40: the first left
7-9 folders and a writable ACL grant on its working directory; the second logged "cannot
schedule new futures after shutdown" for each session and left cgroups for 30 s)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from execengine.hostdirs import parse_owner
from execengine.isolation import acl, cgroups, detect
from execengine.isolation.uids import SANDBOX_GID

REPO = Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent("""
    import atexit, os, sys
    from execengine.config import Config
    from execengine.engine import Engine
    from execengine.registry import ToolRegistry
    level, work, how = sys.argv[1:4]
    cfg = Config().with_overrides({"code_execution.isolation": level,
                                   "approvals.execute_code": "allow"})
    reg = ToolRegistry(cfg)
    engine = Engine(config=cfg, registry=reg)
    assert engine.execute("print(1)", cwd=work).ok
    for name in ("a", "b"):  # live sessions, with their kernels
        assert engine.execute("x = 1", session=name, cwd=work).ok
    if how == "atexit":
        atexit.register(reg.close)
        atexit.register(engine.close)
    print("done", os.getpid(), flush=True)
    # "forgot": exits with the engine and the registry open
""")


def _ours(root: str, pid: int) -> list[str]:
    try:
        names = os.listdir(root)
    except OSError:
        return []
    return [n for n in names if n.startswith("execengine-")
            and (o := parse_owner(n[n.index("-", len("execengine-")) + 1:], "")) is not None
            and o[0] == pid]


def _cgroups_of(pid: int) -> list[str]:
    try:
        layout = cgroups.discover()
    except OSError:
        return []
    parents = [p for p in (layout.v2_parent, *(d for _, d in layout.v1_parents)) if p]
    return [n for parent in parents for n in os.listdir(parent)
            if (o := parse_owner(n, cgroups.PREFIX)) is not None and o[0] == pid]


@pytest.mark.parametrize("how", ["atexit", "forgot"])
@pytest.mark.parametrize("level", ["none", "restricted", "isolated"])
def test_an_engine_open_at_exit_leaves_nothing(level, how):
    report = detect()
    if not report.levels.get(level):
        pytest.skip(f"level {level} not available: {report.reasons.get(level)}")
    with tempfile.TemporaryDirectory(prefix="ee-exit-", dir="/tmp") as root:
        os.chmod(root, 0o755)
        work = Path(root, "work")
        work.mkdir(mode=0o755)
        tmp = Path(root, "tmp")
        tmp.mkdir(mode=0o755)
        env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp), "HOME": root}
        run = subprocess.run([sys.executable, "-c", PROGRAM, level, str(work), how],
                             env=env, capture_output=True, text=True, timeout=50)
        assert run.returncode == 0 and run.stdout.startswith("done "), run.stderr[-3000:]
        assert run.stderr == ""  # nothing logged: no "cannot schedule new futures"
        pid = int(run.stdout.split()[1])
        # checked at once: the closing happened before the process ended
        assert _ours(str(tmp), pid) == []
        assert _cgroups_of(pid) == []
        assert acl.group_perm(str(work), SANDBOX_GID) is None
