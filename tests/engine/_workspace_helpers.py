"""Helpers of the working-directory tests: a generated project, its owners, git on the host.

``project(root)`` writes a 50-file Python package and commits it; ``owned_by(root, owner)``
gives the whole tree to ``owner``; ``as_user(uid)`` runs a short engine program as another
(unprivileged) uid, the engine's host then being that uid, and undoes the one change to the
host that needs (a search entry for the uid on the interpreter's 0700 ancestor).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from execengine.isolation import acl

#: uids of no account: the working directory's owner, and its group
USER, GROUP = 4242, 4343
MODULES = 47  # + the package's __init__.py, core.py and the test module: 50 files
#: git reads no user or system configuration, and trusts the folder whoever owns it
GIT_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": os.devnull, "HOME": "/nonexistent",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}


def git(cwd: Path, *args: str) -> str:
    """git in ``cwd``, as the folder's owner (what it refreshes in ``.git`` stays theirs)."""
    st = os.stat(cwd)
    return subprocess.run(["git", "-c", "safe.directory=*", *args], cwd=cwd, env=GIT_ENV,
                          user=st.st_uid, group=st.st_gid, extra_groups=[], check=True,
                          capture_output=True, text=True, timeout=60).stdout


def project(root: Path) -> Path:
    """A package whose function ``old_name`` 48 other files use, committed."""
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text('"""A generated package."""\n')
    (root / "pkg" / "core.py").write_text("def old_name(x):\n    return x * 2\n")
    for i in range(1, MODULES + 1):
        (root / "pkg" / f"mod_{i:02d}.py").write_text(
            f"from pkg.core import old_name\n\n\ndef use_{i:02d}(x):\n"
            f"    return old_name(x) + {i}\n")
    lines = ["import importlib", "import unittest", "", "from pkg.core import old_name", "",
             "", "class TestAll(unittest.TestCase):", "    def test_every_module(self):",
             f"        for i in range(1, {MODULES + 1}):",
             '            mod = importlib.import_module(f"pkg.mod_{i:02d}")',
             '            self.assertEqual(getattr(mod, f"use_{i:02d}")(1), 2 + i)',
             "        self.assertEqual(old_name(3), 6)", ""]
    (root / "test_project.py").write_text("\n".join(lines))
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "generated")
    return root


def renamed_by_the_host(root: Path) -> str:
    """``git diff --stat`` of the same rename done here, on a fresh copy: the result every
    level must give."""
    project(root)
    for path in sorted(root.rglob("*.py")):
        path.write_text(path.read_text().replace("old_name", "new_name"))
    return git(root, "diff", "--stat")


def owned_by(root: Path, uid: int, gid: int) -> None:
    for path in [root, *root.rglob("*")]:
        os.lchown(path, uid, gid)


def foreign(root: Path, uid: int, gid: int) -> list[str]:
    """Everything in the tree (``.git`` included) not owned by ``uid`` and ``gid``."""
    out = []
    for path in [root, *root.rglob("*")]:
        st = os.lstat(path)
        if (st.st_uid, st.st_gid) != (uid, gid):
            out.append(f"{path.relative_to(root)} {st.st_uid}:{st.st_gid}")
    return out


def run_tests(root: Path) -> subprocess.CompletedProcess[str]:
    """The project's tests, run by the host (no bytecode of its own written)."""
    return subprocess.run([sys.executable, "-B", "-m", "unittest", "-q", "test_project"],
                          cwd=root, capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})


#: run as another uid: one execution with the engine, its result as JSON
RUNNER = r"""
import json, sys
from execengine.config import Config
from execengine.engine.core import Engine
level, cwd, code = sys.argv[1:4]
cfg = Config().with_overrides({
    "code_execution.isolation": level, "code_execution.min_isolation": level,
    "code_execution.mode": "project", "code_execution.timeout": 40,
    "approvals.execute_code": "allow"})
with Engine(cfg) as engine:
    r = engine.execute(code, cwd=cwd)
print(json.dumps({"status": r.status, "output": r.output, "error": r.error,
                  "stderr": r.stderr}))
"""


@contextlib.contextmanager
def user_can_run_python(uid: int) -> Iterator[None]:
    """Let ``uid`` reach this interpreter (CI's lives under root's 0700 home): a search
    entry for it on each ancestor it may not search, removed after (only that entry: other
    engines may change the folder's other entries meanwhile)."""
    granted: list[str] = []
    try:
        for folder in _ancestors(Path(sys.executable).resolve()):
            if os.stat(folder).st_mode & 0o001:
                continue
            acl.grant_user(str(folder), uid, acl.X)
            granted.append(str(folder))
        yield
    finally:
        for folder in reversed(granted):
            acl.grant_user(folder, uid, None)


def _ancestors(path: Path) -> list[Path]:
    return list(reversed(path.parents))


def as_user(uid: int, gid: int, level: str, cwd: Path, code: str, home: Path
            ) -> dict[str, Any]:
    """One execution by an engine whose host runs as ``uid`` (not root)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with user_can_run_python(uid):
        proc = subprocess.run([sys.executable, "-c", RUNNER, level, str(cwd), code],
                              user=uid, group=gid, extra_groups=[], env=env, cwd=str(cwd),
                              capture_output=True, text=True, timeout=55)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
