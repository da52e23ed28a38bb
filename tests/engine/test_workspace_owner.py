"""The working directory behaves like the user's own project, at every level.

A script renames a symbol across a generated 50-file project with plain file I/O, the
``patch`` tool and ``terminal("python -m compileall -q .")``, and appends to a file
``write_file`` made (the script, then its command). Afterwards the host's ``git diff
--stat`` is the one the same rename gives on the host, the project's tests pass, and every
file of the tree, ``.git`` and the bytecode included, belongs to the folder's owner (uid
and group) with the engine's umask. A second execution, in another slot uid, changes what
the first made (``compileall -f`` rewrites its bytecode).

As root: a root-owned project at every level, a user's project at the sandboxed levels
(the script acts there as that user; at ``none`` it is the engine's own uid, root, by
definition). As the unprivileged owner itself (the engine's host runs as that uid):
``none`` and ``restricted`` (``isolated`` needs root).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest
from _workspace_helpers import (
    GROUP,
    USER,
    as_user,
    foreign,
    git,
    owned_by,
    project,
    renamed_by_the_host,
    run_tests,
)

from execengine.config import Config
from execengine.engine.core import Engine
from execengine.isolation.detect import detect
from tests.isolation._slots import another_slot_next

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
    pytest.mark.skipif(os.geteuid() != 0, reason="runs as root (and as a user it makes)"),
]
REPORT = detect()


def levels(*names: str) -> list:
    return [pytest.param(lv, id=lv, marks=pytest.mark.skipif(
        not REPORT.levels.get(lv), reason=f"level {lv} unavailable: {REPORT.reasons.get(lv)}"))
        for lv in names]


REFACTOR = r"""
import json, os, pathlib
from hermes_tools import patch, terminal, write_file
res = {"uid": os.getuid(), "plain": 0, "patched": 0}
files = sorted(str(p) for p in pathlib.Path(".").rglob("*.py") if ".git" not in p.parts)
for i, name in enumerate(files):
    text = pathlib.Path(name).read_text()
    if "old_name" not in text:
        continue
    if i % 5 == 0:  # every fifth file through the host's patch tool
        r = patch(path=name, old_string="old_name", new_string="new_name", replace_all=True)
        assert r.get("success"), r
        res["patched"] += 1
    else:
        pathlib.Path(name).write_text(text.replace("old_name", "new_name"))
        res["plain"] += 1
made = write_file("notes/CHANGES.txt", "renamed old_name to new_name\n")
assert "error" not in made, made
with open("notes/CHANGES.txt", "a") as fh:
    fh.write("by the script\n")
t = terminal("echo by its command >> notes/CHANGES.txt && python -m compileall -q . "
             "&& echo compiled")
res["terminal"] = [t.get("exit_code"), t.get("output", "")[-300:]]
print(json.dumps(res))
"""

#: another execution, another slot: it changes what the first made
AGAIN = r"""
import json, os
from hermes_tools import terminal
res = {"uid": os.getuid()}
with open("notes/CHANGES.txt", "a") as fh:
    fh.write("again\n")
with open("pkg/mod_01.py", "a") as fh:
    fh.write("# touched\n")
t = terminal("python -m compileall -q -f . && echo recompiled")
res["terminal"] = [t.get("exit_code"), t.get("output", "")[-300:]]
print(json.dumps(res))
"""


def _config(level: str) -> Config:
    return Config().with_overrides({
        "code_execution.isolation": level, "code_execution.min_isolation": level,
        "code_execution.mode": "project", "code_execution.timeout": 40,
        "approvals.execute_code": "allow"})


def _result(r) -> dict:
    assert r.status == "success", (r.error, r.output[-2000:], r.stderr[-2000:])
    return json.loads(r.output.strip().splitlines()[-1])


def _expect_the_workflow(work: Path, res: dict, reference: str, owner: tuple[int, int],
                         *, changes: str = "") -> None:
    assert res["plain"] + res["patched"] == 49 and res["patched"] >= 9, res
    assert res["terminal"][0] == 0 and "compiled" in res["terminal"][1], res
    assert foreign(work, *owner) == []  # before the host's own git and tests run there
    assert git(work, "diff", "--stat") == reference
    tests = run_tests(work)
    assert tests.returncode == 0, tests.stderr
    assert (work / "notes" / "CHANGES.txt").read_text() == (
        "renamed old_name to new_name\nby the script\nby its command\n" + changes)
    assert list((work / "pkg" / "__pycache__").glob("mod_01.*.pyc")), "no bytecode"
    umask = os.umask(0o022)
    os.umask(umask)
    for path in (work / "notes" / "CHANGES.txt", work / "pkg" / "__pycache__",
                 work / "notes"):
        want = (0o777 if path.is_dir() else 0o666) & ~umask
        assert stat.S_IMODE(path.stat().st_mode) == want, path


@pytest.fixture
def reference(tmp_path) -> str:
    return renamed_by_the_host(tmp_path / "reference")


@pytest.mark.parametrize("level", levels("none", "restricted", "isolated"))
def test_a_refactoring_as_root_in_roots_project(level, tmp_path, reference):
    work = project(tmp_path / "work")
    with Engine(_config(level)) as engine:
        res = _result(engine.execute(REFACTOR, cwd=str(work)))
    _expect_the_workflow(work, res, reference, (0, 0))


@pytest.fixture
def users_folder():
    """A folder the unprivileged owner can reach (``tmp_path`` is under root's 0700
    folder), removed after."""
    base = Path(tempfile.mkdtemp(prefix="execengine-owner-"))
    base.chmod(0o755)
    home = base / "home"
    home.mkdir()
    os.chown(home, USER, GROUP)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("level", levels("restricted", "isolated"))
def test_a_refactoring_as_root_in_a_users_project(level, users_folder, reference):
    """The script acts as the user whose project it is: every file it, its command and
    its tools make is the user's; a second execution in another slot uid changes what the
    first made."""
    work = project(users_folder / "work")
    owned_by(work, USER, GROUP)
    with Engine(_config(level)) as engine:
        res = _result(engine.execute(REFACTOR, cwd=str(work)))
    _expect_the_workflow(work, res, reference, (USER, GROUP))
    with another_slot_next(res["uid"]), Engine(_config(level)) as engine:
        again = _result(engine.execute(AGAIN, cwd=str(work)))
    assert again["uid"] != res["uid"], (res, again)  # another slot uid
    assert again["terminal"][0] == 0 and "recompiled" in again["terminal"][1], again
    assert (work / "notes" / "CHANGES.txt").read_text().endswith("by its command\nagain\n")
    assert foreign(work, USER, GROUP) == []


@pytest.mark.parametrize("level", levels("none", "restricted"))
def test_a_refactoring_by_the_unprivileged_owner_itself(level, users_folder, reference):
    """The engine's host runs as the project's (unprivileged) owner: the same result."""
    work = project(users_folder / "work")
    owned_by(work, USER, GROUP)
    res = as_user(USER, GROUP, level, work, REFACTOR, users_folder / "home")
    assert res["status"] == "success", res
    _expect_the_workflow(work, json.loads(res["output"].strip().splitlines()[-1]),
                         reference, (USER, GROUP))
