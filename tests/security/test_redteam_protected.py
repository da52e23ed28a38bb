"""Protected paths that the script moves aside instead of writing.

At ``isolated``, and at ``restricted`` as root (a mount namespace of the entry's own),
``.git`` of the working directory is a read-only bind. A red team renamed ``.git`` itself
(``.git.moved`` kept the read-only binds) and made a new ``.git`` with a
``core.fsmonitor`` config and hooks, which the host's next ``git status`` in that folder
ran (as root, the script acting as the folder's owner). Now every folder on the way to a
protected path is a mount point in the sandbox, so it cannot be renamed or removed; the
``.git`` file of a worktree (which names the repository git uses) is read-only itself; and
a protected path a config lists below a subfolder keeps its folder. Level ``none`` is the
negative control: the same moves succeed there.
"""

from __future__ import annotations

import json

import pytest

from .conftest import ATTEMPT, binds, level_engine, level_params

LEVEL = level_params()

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


@pytest.mark.parametrize("level", LEVEL)
def test_a_protected_paths_folder_cannot_be_moved_aside(level, tmp_path):
    work = tmp_path / "work"
    (work / ".git" / "hooks").mkdir(parents=True)
    (work / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (work / "out").mkdir()
    results = work / "out" / "results.jsonl"
    results.write_text("real\n")
    for path in [work, *work.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)  # any uid may write: only the binds
    with level_engine(level, **{"policy.protected_paths": [str(results)]}) as engine:
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
    if not binds(level):
        pytest.skip("restricted as a non-root host: no mount namespace (docs/confinement.md)")
    assert res["rename_git"] == "OSError", res  # EBUSY: a mount point
    assert not (work / ".git.moved").exists(), res
    assert config == "[core]\n\tbare = false\n" and hooks == [], res
    assert res["rename_hooks"] != "done" and res["rename_out"] != "done", res
    assert res["replace_results"] != "done" and results.read_text() == "real\n", res


@pytest.mark.parametrize("level", LEVEL)
def test_a_worktrees_git_file_stays_as_it_was(level, tmp_path):
    """In a worktree ``.git`` is a file naming the repository: git follows it, so it is
    pinned read-only where the level binds (written, swapped for a folder, removed:
    refused)."""
    work = tmp_path / "work"
    work.mkdir(mode=0o777)
    work.chmod(0o777)
    pointer = "gitdir: /srv/repo/.git/worktrees/wt\n"
    (work / ".git").write_text(pointer)
    (work / ".git").chmod(0o666)
    with level_engine(level) as engine:
        r = engine.execute(WORKTREE, cwd=str(work))
    assert r.status == "success", (r.error, r.output, r.stderr)
    res = json.loads(r.output.splitlines()[-1])
    if level == "none":
        assert res["write"] == "done" and res["swap"] == "done", res
        assert (work / ".git").is_dir(), res
        return
    if not binds(level):
        pytest.skip("restricted as a non-root host: no mount namespace (docs/confinement.md)")
    assert set(res.values()) == {"OSError"}, res
    assert (work / ".git").read_text() == pointer and not (work / ".git.old").exists()


INTO_GIT = ATTEMPT + r"""
from hermes_tools import write_file
def tool(name, path, text):
    res[name] = "error" if "error" in write_file(path, text) else "done"
redirect = '[core]\n\tfsmonitor = "touch PWNED"\n'
tool("tool_commondir", ".git/commondir", os.getcwd() + "/.git/x\n")
tool("tool_other_config", ".git/x/config", redirect)
tool("tool_gitfile", "sub/.git", "gitdir: evil\n")
tool("tool_nested", "vendored/.git/config", redirect)
tool("tool_new_repo", "fresh/.git/HEAD", "ref: refs/heads/main\n")
attempt("direct_commondir", lambda: open(".git/commondir", "w").write("x\n"))
attempt("direct_worktree_config", lambda: open(".git/config.worktree", "w").write(redirect))
attempt("direct_submodule_file", lambda: open("sub/.git", "w").write("gitdir: evil\n"))
attempt("direct_submodule_move", lambda: os.rename("sub", "sub.moved"))
print(json.dumps(res))
"""


#: each level as by default (the script acts as the folder's owner, whose files git
#: trusts), and the sandboxed ones again with ``workdir_as_owner: false`` (its slot uid)
OWNER_CASES = [pytest.param(p.values[0], True, marks=p.marks, id=p.id) for p in LEVEL] + [
    pytest.param(p.values[0], False, marks=p.marks, id=f"{p.id}-slot-uid")
    for p in LEVEL if p.values[0] != "none"]


@pytest.mark.parametrize(("level", "owner"), OWNER_CASES)
def test_nothing_in_git_is_written_for_the_script(level, owner, tmp_path):
    """git reads more of ``.git`` than ``config`` and ``hooks/``: ``commondir`` sends it to
    another folder's config, a worktree's or submodule's ``.git`` file to another
    repository. A red team had ``write_file`` (the host's, as root) write them and the
    host's ``git status`` ran the planted ``core.fsmonitor``. The tools never write
    anything of a ``.git`` (there or not, at any depth) at a confined level; at
    ``isolated`` and ``restricted`` (as root) all of the root's ``.git`` and each
    submodule's ``.git`` file (where the repository's config says its work tree is) are
    read-only to the script too (as the folder's owner as well), and the submodule's folder
    cannot be moved."""
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    (work / ".git" / "config").write_text("[core]\n")
    # a submodule: its .git file names its repository in ours, whose config names it back
    (work / ".git" / "modules" / "sub").mkdir(parents=True)
    (work / ".git" / "modules" / "sub" / "config").write_text(
        "[core]\n\tworktree = ../../../sub\n")
    (work / "sub").mkdir()
    (work / "sub" / ".git").write_text("gitdir: ../.git/modules/sub\n")
    (work / "vendored" / ".git").mkdir(parents=True)
    (work / "fresh").mkdir()
    for path in [work, *work.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)
    with level_engine(level, **{"code_execution.workdir_as_owner": owner}) as engine:
        r = engine.execute(INTO_GIT, cwd=str(work))
    assert r.status == "success", (r.error, r.output, r.stderr)
    res = json.loads(r.output.splitlines()[-1])
    tools = {k: v for k, v in res.items() if k.startswith("tool_")}
    direct = {k: v for k, v in res.items() if k.startswith("direct_")}
    if level == "none":  # the negative control: everything is written
        assert set(res.values()) == {"done"}, res
        assert (work / ".git" / "commondir").exists() and (work / "fresh" / ".git").is_dir()
        return
    assert set(tools.values()) == {"error"}, res
    assert not (work / ".git" / "x").exists() and not (work / "fresh" / ".git").exists()
    assert not (work / "vendored" / ".git" / "config").exists(), res
    if binds(level):  # EROFS (read-only binds), EBUSY (a mount point)
        assert set(direct.values()) == {"OSError"}, res
        assert (work / "sub" / ".git").read_text() == "gitdir: ../.git/modules/sub\n", res
        assert sorted(p.name for p in (work / ".git").iterdir()) == ["config", "modules"]
