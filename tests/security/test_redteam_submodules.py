"""A submodule the working directory's repository lists but has not populated.

After a clone without ``--recurse-submodules`` the submodule's folder is empty and
``.git/modules`` holds nothing of it, but the index lists it (a gitlink). A red team removed
the empty folder and made ``sub/.git`` a repository of the script's own, with a
``core.fsmonitor`` command: the host's next ``git status`` in the working directory entered
it (with ``GIT_DIR`` set, so git's ownership check did not apply) and ran the command as
root. The policy now reads the gitlinks from the index: at ``isolated`` (and ``restricted``
as root) an unpopulated submodule's folder is a read-only bind (it cannot be removed, nor
written), and the tools never write there at any confined level. The test runs the host's
real ``git status``; level ``none`` is the negative control (the planted command runs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from execengine.confine.policy import gitlinks

from .conftest import ATTEMPT, binds, level_engine, level_params

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

LEVEL = level_params()
#: git reads no user or system configuration here
GIT_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": os.devnull, "HOME": "/nonexistent",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}


def git(cwd, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True,
                          capture_output=True, text=True, timeout=60).stdout


def _clone_with_a_submodule(tmp_path):
    inner, outer, work = tmp_path / "inner", tmp_path / "outer", tmp_path / "work"
    for repo in (inner, outer):
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
    (inner / "a.txt").write_text("a\n")
    git(inner, "add", "a.txt")
    git(inner, "commit", "-q", "-m", "inner")
    (outer / "b.txt").write_text("b\n")
    git(outer, "add", "b.txt")
    git(outer, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner),
        "sub")
    git(outer, "commit", "-q", "-m", "outer")
    git(tmp_path, "clone", "-q", str(outer), str(work))  # the submodule not populated
    return work


def test_the_index_names_the_gitlinks_in_every_version(tmp_path):
    work = _clone_with_a_submodule(tmp_path)
    assert sorted(os.listdir(work / "sub")) == []
    index = str(work / ".git" / "index")
    assert gitlinks(index) == ("sub",)
    head = git(work, "rev-parse", "HEAD").strip()
    git(work, "update-index", "--add", "--cacheinfo", f"160000,{head},libs/deep/two")
    for version in ("4", "3", "2"):
        git(work, "update-index", "--index-version", version)
        assert sorted(gitlinks(index)) == ["libs/deep/two", "sub"], version
    assert gitlinks(str(tmp_path / "nowhere" / "index")) == ()
    (tmp_path / "junk").write_bytes(b"DIRC\0\0\0\x09junk")
    assert gitlinks(str(tmp_path / "junk")) == ()


PLANT = ATTEMPT + r"""
from hermes_tools import write_file
def plant():
    os.rmdir("sub")
    os.makedirs("sub/.git/objects")
    os.makedirs("sub/.git/refs/heads")
    open("sub/.git/HEAD", "w").write("ref: refs/heads/main\n")
    open("sub/.git/config", "w").write(
        '[core]\n\tbare = false\n\tfsmonitor = "touch {marker}; false"\n')
attempt("plant", plant)
res["tool"] = "error" if "error" in write_file("sub/notes.txt", "x") else "done"
print(json.dumps(res))
"""


@pytest.mark.parametrize("level", LEVEL)
def test_an_unpopulated_submodule_cannot_be_planted(level, tmp_path):
    work = _clone_with_a_submodule(tmp_path)
    work.chmod(0o777)  # the sandbox uid may write the working directory
    marker = tmp_path / "PLANTED-RAN"
    with level_engine(level) as engine:
        r = engine.execute(PLANT.replace("{marker}", str(marker)), cwd=str(work))
    assert r.status == "success", (r.error, r.output, r.stderr)
    res = json.loads(r.output.splitlines()[-1])
    subprocess.run(["git", "status"], cwd=work, env=GIT_ENV, capture_output=True,
                   timeout=60)
    if level == "none":  # the negative control: the host's git status runs it
        assert res == {"plant": "done", "tool": "done"} and marker.exists(), res
        return
    if not binds(level):
        pytest.skip("restricted as a non-root host: no mount namespace (docs/confinement.md)")
    assert res["plant"] == "OSError" and res["tool"] == "error", res
    assert not marker.exists() and sorted(os.listdir(work / "sub")) == [], res


@pytest.mark.parametrize("level", LEVEL)
def test_git_that_writes_in_the_sandbox_is_refused_with_a_hint(level, tmp_path):
    """At ``isolated`` and ``restricted`` (as root) the repository's ``.git`` is read-only
    to the script's own git too (which works on the folder's repository as its owner): a
    ``git add`` fails, and the result says why and what to do; at ``none`` it works."""
    work = _clone_with_a_submodule(tmp_path)
    work.chmod(0o777)
    code = ("import subprocess\n(open('new.txt', 'w')).write('x')\n"
            f"r = subprocess.run(['git', 'add', 'new.txt'], env={GIT_ENV!r}, "
            "capture_output=True, text=True)\nprint(r.returncode, r.stderr.strip())\n")
    with level_engine(level) as engine:
        r = engine.execute(code, cwd=str(work))
    assert r.status == "success", (r.error, r.output, r.stderr)
    staged = git(work, "diff", "--cached", "--name-only").split()
    if level == "none":
        assert r.output.startswith("0") and staged == ["new.txt"] and r.hint is None, r
        return
    if not binds(level):
        pytest.skip("restricted as a non-root host: no mount namespace (docs/confinement.md)")
    assert "Read-only file system" in r.output and staged == [], r
    assert r.hint is not None and ".git is read-only in the sandbox" in r.hint, r
