"""What of git the policy protects: every ``.git`` path, and the submodules' ``.git`` files
where the repository's own config says their work trees are."""

from __future__ import annotations

from execengine.config import Config
from execengine.confine.policy import ExecutionPolicy, _submodules
from execengine.workdirs import forget


def _module(gitdir, worktree):
    gitdir.mkdir(parents=True)
    (gitdir / "config").write_text(f'[core]\n\tbare = false\n\tWorkTree = "{worktree}"\n')


def test_submodules_nested_and_named_with_slashes(tmp_path):
    modules = tmp_path / ".git" / "modules"
    _module(modules / "libs" / "a", "../../../../libs/a")  # name "libs/a"
    _module(modules / "libs" / "a" / "modules" / "inner", "../../../../../../libs/a/inner")
    (modules / "broken").mkdir()  # no config: a folder of names, holding none
    found = sorted(_submodules(str(tmp_path)))
    assert found == [str(tmp_path / "libs" / "a" / ".git"),
                     str(tmp_path / "libs" / "a" / "inner" / ".git")]


def test_no_repository_no_submodules(tmp_path):
    assert _submodules(str(tmp_path)) == []


def test_bounded(tmp_path):
    for i in range(20):
        _module(tmp_path / ".git" / "modules" / f"m{i}", f"../../../m{i}")
    assert len(_submodules(str(tmp_path), limit=5)) == 5


def test_the_policy_protects_every_git_path_and_the_submodules(tmp_path):
    forget()
    _module(tmp_path / ".git" / "modules" / "sub", "../../../sub")
    policy = ExecutionPolicy.for_execution(Config(), cwd=str(tmp_path), level="isolated")
    assert str(tmp_path / ".git") in policy.protected
    assert str(tmp_path / "sub" / ".git") in policy.protected
    for path in (".git", ".git/commondir", "fresh/.git/HEAD", "vendored/.git", "sub/.git"):
        assert policy.is_protected(str(tmp_path / path)), path
        assert not policy.writable(str(tmp_path / path)), path
    for path in ("src/a.py", ".gitignore", "sub/x.git", ".github/workflows/ci.yml"):
        assert not policy.is_protected(str(tmp_path / path)), path
        assert policy.writable(str(tmp_path / path)), path
