"""Which working directories a sandboxed execution refuses (``host/confinement.py``), on
real folders and symbolic links: pure logic, no child."""

from __future__ import annotations

import os

import pytest

from execengine.confine.policy import ExecutionPolicy
from execengine.errors import SandboxError
from execengine.host.confinement import check_workdir


def _policy(level: str, *denied: str) -> ExecutionPolicy:
    return ExecutionPolicy(level=level, denied_paths=tuple(denied))


@pytest.fixture
def tree(tmp_path):
    secret = tmp_path / "secret"
    (secret / "inner").mkdir(parents=True)
    (tmp_path / "open" / "inner").mkdir(parents=True)
    (tmp_path / "to-secret").symlink_to(secret)
    (tmp_path / "to-inner").symlink_to(secret / "inner")
    return tmp_path


@pytest.mark.parametrize("denied, cwd", [
    ("secret", "secret"),
    ("secret", "secret/inner"),
    ("secret", "to-inner"),            # the working directory leads there through a link
    ("to-secret", "secret/inner"),     # the denied path is a link to the folder
    ("to-secret", "to-inner"),
    ("secret/inner", "to-secret/inner"),
])
def test_a_folder_in_a_denied_path_is_refused_however_it_is_named(tree, denied, cwd):
    policy = _policy("restricted", str(tree / denied))
    with pytest.raises(SandboxError, match="denied path"):
        check_workdir(str(tree / cwd), policy)


@pytest.mark.parametrize("denied, cwd", [
    ("secret", "open"), ("secret", "open/inner"), ("secret/inner", "secret"),
    ("to-inner", "to-secret"), ("missing", "open"), ("secret-file", "open"),
])
def test_a_folder_outside_every_denied_path_is_accepted(tree, denied, cwd):
    (tree / "secret-file").write_text("x")
    check_workdir(str(tree / cwd), _policy("restricted", str(tree / denied)))


def test_a_denied_path_given_with_a_tilde_is_the_home_folder(tree, monkeypatch):
    monkeypatch.setenv("HOME", str(tree / "secret"))
    with pytest.raises(SandboxError, match=r"denied path \(~/inner\)"):
        check_workdir(str(tree / "to-inner"), _policy("isolated", "~/inner"))


def test_level_none_refuses_nothing(tree):
    """The negative control: without a sandbox nothing is granted, so nothing is refused."""
    check_workdir(str(tree / "secret"), _policy("none", str(tree / "secret")))
    with pytest.raises(SandboxError):
        check_workdir(str(tree / "secret"), _policy("restricted", str(tree / "secret")))


def test_a_system_folder_is_refused_even_with_no_denied_path():
    with pytest.raises(SandboxError, match="system folder"):
        check_workdir(os.path.realpath("/usr/lib"), _policy("isolated"))
