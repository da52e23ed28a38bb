"""The Python walk visits exactly the files ripgrep lists, for tricky .gitignore rules."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from execengine.fileops.search.globs import compile_glob, ignore_verdict, parse_gitignore
from execengine.fileops.search.pysearch import PythonBackend
from execengine.fileops.search.query import make_query
from execengine.fileops.search.rg import RipgrepBackend

RULES = {
    ".gitignore": "\n".join([
        "**/gen", "logs/**", "a/**/b.txt", "*.py[co]", r"\#lit", "dironly/", "!keep.pyc",
        "trail\\ ", "/top.txt", "*.tmp", "deep/*/x.md", "", "# c",
    ]) + "\n",
    "sub/.gitignore": "!*.tmp\n*.md\n",
}
FILES = [
    "gen", "x/gen/f.txt", "logs/a.txt", "logs/in/b.txt", "a/b.txt", "a/q/r/b.txt", "m.pyc",
    "m.pyo", "keep.pyc", "#lit", "lit", "dironly/f", "x/dironly/f", "dironly_file", "trail ",
    "trail", "top.txt", "sub/top.txt", "t.tmp", "sub/t.tmp", "sub/r.md", "deep/a/x.md",
    "deep/a/b/x.md", "readme.md", "y/dironly",
]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("walk")
    for rel, text in RULES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for rel in FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x\n")
    return root


def listing(backend, root: Path) -> list[str]:
    q = make_query("*", root, target="files")
    return sorted(str(Path(p).relative_to(root)) for p in backend.files(q, 10_000))


def test_python_walk_follows_gitignore(tree):
    got = listing(PythonBackend(), tree)
    assert got == sorted([
        ".gitignore", "sub/.gitignore", "keep.pyc", "lit", "dironly_file", "trail",
        "sub/top.txt", "sub/t.tmp", "deep/a/b/x.md", "readme.md", "y/dironly",
    ])


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep (rg) is not installed")
def test_ripgrep_lists_the_same(tree):
    assert listing(RipgrepBackend(shutil.which("rg") or "rg"), tree) == listing(
        PythonBackend(), tree)


@pytest.mark.parametrize(("glob", "path", "hit"), [
    ("*.py", "a/b/c.py", True),
    ("*.py", "a/b/c.pyc", False),
    ("src/*.py", "src/a.py", True),
    ("src/*.py", "src/x/a.py", False),
    ("src/**/*.py", "src/a.py", True),
    ("src/**/*.py", "src/x/y/a.py", True),
    ("**/test_*.py", "test_a.py", True),
    ("*.{js,ts}", "x/y.ts", True),
    ("[!a]*.txt", "b.txt", True),
    ("[!a]*.txt", "a.txt", False),
    ("?.md", "ab.md", False),
])
def test_globs(glob, path, hit):
    assert compile_glob(glob).matches(path) is hit


def test_gitignore_last_match_wins_and_dir_only():
    rules = parse_gitignore("*.log\n!important.log\nbuild/\n")
    assert ignore_verdict(rules, "x/debug.log", False) is True
    assert ignore_verdict(rules, "x/important.log", False) is False
    assert ignore_verdict(rules, "build", True) is True
    assert ignore_verdict(rules, "build", False) is None
    assert ignore_verdict(rules, "src/main.c", False) is None
