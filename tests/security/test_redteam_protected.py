"""Protected paths that the script moves aside instead of writing.

At ``isolated`` ``.git/hooks`` and ``.git/config`` of the working directory are read-only
binds. A red team renamed ``.git`` itself (``.git.moved`` kept the read-only binds) and made
a new ``.git`` with a ``core.fsmonitor`` config and hooks, which the host's next ``git
status`` in that folder ran (as root with ``workdir_as_owner``). Now every folder on the
way to a protected path is a mount point in the sandbox, so it cannot be renamed or
removed; the ``.git`` file of a worktree (which names the repository git uses) is
read-only itself; and a protected path a config lists below a subfolder keeps its folder.
Level ``none`` is the negative control: the same moves succeed there.
"""

from __future__ import annotations

import json

import pytest

from execengine.config import Config
from execengine.engine.core import Engine

from .conftest import ATTEMPT, level_params

NONE_OR_ISOLATED = [p for p in level_params() if p.values[0] in ("none", "isolated")]

MOVE_ASIDE = ATTEMPT + r"""
def plant_git():
    os.rename(".git", ".git.moved")
    os.makedirs(".git/hooks")
    with open(".git/config", "w") as f:
        f.write("[core]\n\tfsmonitor = touch PWNED\n")
    with open(".git/hooks/pre-commit", "w") as f:
        f.write("#!/bin/sh\ntouch PWNED\n")

attempt("rename_hooks", lambda: os.rename(".git/hooks", ".git/hooks.old"))
attempt("rename_git", plant_git)
attempt("rename_out", lambda: os.rename("out", "out.moved"))
attempt("replace_results", lambda: (os.makedirs("out2", exist_ok=True),
                                    open("out2/results.jsonl", "w").write("forged\n"),
                                    os.rename("out2", "out")))
print(json.dumps(res))
"""

WORKTREE = ATTEMPT + r"""
attempt("write", lambda: open(".git", "w").write("gitdir: /tmp/evil\n"))
attempt("swap", lambda: (os.rename(".git", ".git.old"), os.makedirs(".git"),
                         open(".git/config", "w").write("[core]\n")))
attempt("remove", lambda: os.unlink(".git"))
print(json.dumps(res))
"""


def _engine(level: str, results: str) -> Engine:
    return Engine(Config().with_overrides({
        "code_execution.isolation": level, "code_execution.min_isolation": level,
        "code_execution.timeout": 30, "policy.protected_paths": [results]}))


@pytest.mark.parametrize("level", NONE_OR_ISOLATED)
def test_a_protected_paths_folder_cannot_be_moved_aside(level, tmp_path):
    work = tmp_path / "work"
    (work / ".git" / "hooks").mkdir(parents=True)
    (work / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (work / "out").mkdir()
    results = work / "out" / "results.jsonl"
    results.write_text("real\n")
    for path in [work, *work.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)  # any uid may write: only the binds
    with _engine(level, str(results)) as engine:
        r = engine.execute(MOVE_ASIDE, cwd=str(work))
    assert r.status == "success", (r.error, r.output, r.stderr)
    res = json.loads(r.output.splitlines()[-1])
    config = (work / ".git" / "config").read_text()
    hooks = sorted(p.name for p in (work / ".git" / "hooks").iterdir())
    if level == "none":  # nothing stops the same moves
        assert res["rename_git"] == "done" and "fsmonitor" in config, res
        assert hooks == ["pre-commit"] and (work / ".git.moved").is_dir(), res
        assert res["rename_out"] == "done", res
        return
    assert res["rename_git"] == "OSError", res  # EBUSY: a mount point
    assert not (work / ".git.moved").exists(), res
    assert config == "[core]\n\tbare = false\n" and hooks == [], res
    assert res["rename_hooks"] != "done" and res["rename_out"] != "done", res
    assert res["replace_results"] != "done" and results.read_text() == "real\n", res


@pytest.mark.parametrize("level", NONE_OR_ISOLATED)
def test_a_worktrees_git_file_stays_as_it_was(level, tmp_path):
    """In a worktree ``.git`` is a file naming the repository: git follows it, so it is
    pinned read-only at ``isolated`` (written, swapped for a folder, removed: refused)."""
    work = tmp_path / "work"
    work.mkdir(mode=0o777)
    work.chmod(0o777)
    pointer = "gitdir: /srv/repo/.git/worktrees/wt\n"
    (work / ".git").write_text(pointer)
    (work / ".git").chmod(0o666)
    with _engine(level, str(work / "none.jsonl")) as engine:
        r = engine.execute(WORKTREE, cwd=str(work))
    assert r.status == "success", (r.error, r.output, r.stderr)
    res = json.loads(r.output.splitlines()[-1])
    if level == "none":
        assert res["write"] == "done" and res["swap"] == "done", res
        assert (work / ".git").is_dir(), res
        return
    assert set(res.values()) == {"OSError"}, res
    assert (work / ".git").read_text() == pointer and not (work / ".git.old").exists()
