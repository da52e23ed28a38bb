"""search_files through the real registry: ripgrep and pure Python must answer the same."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from execengine.config import Config
from execengine.context import CallContext
from execengine.fileops.search import search
from execengine.host.base import scope_of
from execengine.registry import ToolRegistry

HAVE_RG = shutil.which("rg") is not None
needs_rg = pytest.mark.skipif(not HAVE_RG, reason="ripgrep (rg) is not installed")


def build_tree(root: Path) -> None:
    files = {
        ".gitignore": "*.log\nbuild/\n!keep.log\n/rootonly.txt\n# comment\n",
        "a.py": "import os\n\ndef foo():\n    return bar(1)  # TODO tidy\n\ndef bar(x):\n"
                "    return x\n",
        "a.txt": "foo at the top\n",
        "a-b.txt": "foo dash\n",
        "a/z.txt": "foo in a\n",
        "keep.log": "foo kept log\n",
        "x.log": "foo ignored log\n",
        "rootonly.txt": "foo root only\n",
        "build/out.py": "def foo(): pass\n",
        "sub/.gitignore": "secret_*.py\n!x.log\n",
        "sub/rootonly.txt": "foo not anchored here\n",
        "sub/x.log": "foo re-included\n",
        "sub/secret_a.py": "def foo(): hidden\n",
        "sub/deep/er/d.py": "class Foo:\n    def foo(self):\n        return 'foo'\n",
        "sub/ünï code.txt": "naïve foo über\n",
        "sub/crlf.txt": "foo one\r\nfoo two\r\n",
        ".hidden/h.py": "def foo(): dotted\n",
        "node_modules/m.js": "foo()\n",
        ".git/config": "foo = 1\n",
        ".venv/lib.py": "def foo(): venv\n",
        "venv/lib.py": "def foo(): venv\n",
        "pkg/__pycache__/c.py": "foo\n",
        "long.txt": "foo " + "y" * 3000 + "\n",
        "noeol.txt": "last foo",
        "aa.txt": "aa\n",
        "mixed.py": "xx = 1\nyy = xx\nzz = 'aab'\n",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="")
    (root / "bin.dat").write_bytes(b"foo\n\x00\x01\x02foo\n")
    (root / "late.dat").write_bytes(b"foo early\n" + b"z" * 70_000 + b"\n\x00\n")
    (root / "bad.txt").write_bytes(b"caf\xe9 foo\n")
    (root / "link.py").symlink_to(root / "a.py")
    (root / "linkdir").symlink_to(root / "sub")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("search") / "proj"
    build_tree(root)
    return root


@pytest.fixture(scope="module")
def reg(tree: Path):
    config = Config().with_overrides({"terminal.cwd": str(tree), "files.denied_paths": []})
    with ToolRegistry.with_builtins(config, plugins=False) as r:
        yield r


def run(reg: ToolRegistry, backend: str, **args):
    out = json.loads(reg.dispatch("search_files", args, CallContext(search_backend=backend)))
    if "error" not in out:
        assert out.pop("backend") == backend
    return out


def both(reg: ToolRegistry, **args):
    """The Python answer, checked identical to ripgrep's when rg is installed."""
    py = run(reg, "python", **args)
    if HAVE_RG:
        assert run(reg, "ripgrep", **args) == py
    return py


QUERIES = [
    {"pattern": "foo"},
    {"pattern": "^def "},
    {"pattern": "TODO|FIXME"},
    {"pattern": "(?i)FOO"},
    {"pattern": r"\bfoo\b", "output_mode": "count"},
    {"pattern": "foo", "output_mode": "files_with_matches"},
    {"pattern": "ü|ï"},
    {"pattern": r"foo(?=\()"},
    {"pattern": r"(\w)\1"},
    {"pattern": "foo", "file_glob": "*.py"},
    {"pattern": "foo", "file_glob": "*.{py,log}"},
    {"pattern": "foo", "file_glob": "sub/**"},
    {"pattern": "foo", "context": 2},
    {"pattern": "foo", "limit": 3, "offset": 4},
    {"pattern": "foo", "path": "sub"},
    {"pattern": "foo", "path": "a.py"},
    {"pattern": "foo$"},
    {"pattern": "*", "target": "files"},
    {"pattern": "*.py", "target": "files"},
    {"pattern": "sub/**/*.py", "target": "files"},
    {"pattern": "*.txt", "target": "files", "path": "sub", "limit": 2, "offset": 1},
]


@pytest.mark.parametrize("args", QUERIES, ids=[json.dumps(q, ensure_ascii=False) for q in QUERIES])
def test_backends_agree(reg, args):
    # the point is the comparison: without ripgrep there is nothing to compare, which is a
    # failure, not a pass (.ci/run installs it)
    assert HAVE_RG, "ripgrep (rg) is not installed: the backends cannot be compared"
    both(reg, **args)


def paths(out) -> list[str]:
    return sorted({m["path"] for m in out["matches"]})


def test_ignored_skipped_binary_and_links_are_left_out(reg):
    out = both(reg, pattern="foo", limit=1000)
    found = paths(out)
    for gone in ("x.log", "rootonly.txt", "build/out.py", "sub/secret_a.py", "node_modules/m.js",
                 ".git/config", ".venv/lib.py", "venv/lib.py", "pkg/__pycache__/c.py",
                 "bin.dat", "late.dat", "link.py"):
        assert gone not in found, gone
    assert not any(p.startswith("linkdir") for p in found)
    for kept in ("keep.log", "sub/x.log", "sub/rootonly.txt", ".hidden/h.py", "a.py",
                 "sub/deep/er/d.py", "sub/ünï code.txt", "noeol.txt", "bad.txt"):
        assert kept in found, kept


def test_order_fields_and_line_numbers(reg):
    out = both(reg, pattern="foo", limit=1000)
    first = out["matches"][:4]
    assert [m["path"] for m in first] == [".hidden/h.py", "a/z.txt", "a-b.txt", "a.py"]
    assert out["matches"][3] == {"path": "a.py", "line": 3, "content": "def foo():"}
    crlf = [m for m in out["matches"] if m["path"] == "sub/crlf.txt"]
    assert [(m["line"], m["content"]) for m in crlf] == [(1, "foo one"), (2, "foo two")]
    long = next(m for m in out["matches"] if m["path"] == "long.txt")
    assert long["content"].endswith("… [3004 characters]") and len(long["content"]) < 600
    assert out["total_count"] == len(out["matches"]) and out["truncated"] is False


def test_paging_covers_everything_once(reg):
    full = both(reg, pattern="foo", limit=1000)["matches"]
    pages, offset = [], 0
    while True:
        page = both(reg, pattern="foo", limit=4, offset=offset)
        assert page["total_count"] == len(full)
        pages += page["matches"]
        if "next_offset" not in page:
            break
        assert f"use offset={page['next_offset']}" in page["hint"]
        offset = page["next_offset"]
    assert pages == full
    past = both(reg, pattern="foo", offset=10_000)
    assert past["matches"] == [] and past["total_count"] == len(full)


def test_context_lines(reg):
    out = both(reg, pattern="TODO", context=2)
    (m,) = out["matches"]
    assert m["line"] == 4
    assert m["before"] == [{"line": 2, "content": ""}, {"line": 3, "content": "def foo():"}]
    assert m["after"] == [{"line": 5, "content": ""}, {"line": 6, "content": "def bar(x):"}]


def test_count_and_files_modes(reg):
    counts = both(reg, pattern="foo", path="sub", output_mode="count")
    assert {"path": "sub/crlf.txt", "count": 2} in counts["counts"]
    assert counts["total_matches"] == sum(c["count"] for c in counts["counts"])
    files = both(reg, pattern="foo", path="sub", output_mode="files_with_matches")
    assert files["files"] == [c["path"] for c in counts["counts"]]
    assert files["total_count"] == len(files["files"])


def test_file_name_search(reg):
    out = both(reg, pattern="*.py", target="files", limit=100)
    assert out["files"] == [".hidden/h.py", "a.py", "mixed.py", "sub/deep/er/d.py"]
    deep = both(reg, pattern="**/d.py", target="files")
    assert deep["files"] == ["sub/deep/er/d.py"]
    with_glob = both(reg, pattern="*", target="files", file_glob="*.log")
    assert with_glob["files"] == ["keep.log", "sub/x.log"]


def test_regex_dialect_features_agree(reg):
    assert paths(both(reg, pattern=r"(\w)\1 =")) == ["mixed.py"]
    assert [m["line"] for m in both(reg, pattern=r"foo(?=\()", path="a.py")["matches"]] == [3]
    assert paths(both(reg, pattern="foo$")) == ["bad.txt", "noeol.txt"]
    assert paths(both(reg, pattern="included$", path="sub")) == ["sub/x.log"]


@pytest.mark.parametrize(("args", "message"), [
    ({"pattern": "foo("}, "invalid regex 'foo('"),
    ({"pattern": "[[:alpha:]]"}, "invalid regex"),
    ({"pattern": "a\\nb"}, "within one line"),
    ({"pattern": ""}, "pattern must be a non-empty string"),
    ({"pattern": "x", "target": "names"}, "target must be 'content' or 'files'"),
    ({"pattern": "x", "output_mode": "lines"}, "output_mode must be one of"),
    ({"pattern": "x", "limit": 0}, "limit must be at least 1"),
    ({"pattern": "x", "offset": -1}, "offset must be at least 0"),
    ({"pattern": "x", "context": "2"}, "context must be an integer"),
    ({"pattern": "x", "path": "nope"}, "Path not found: 'nope'"),
    ({"pattern": "*.{py", "target": "files"}, "invalid glob"),
])
def test_bad_input_is_a_clear_error(reg, args, message):
    for backend in ("python", "ripgrep") if HAVE_RG else ("python",):
        out = run(reg, backend, **args)
        assert message in out["error"], (backend, out)


def test_denied_paths_are_refused_and_filtered(tree):
    config = Config().with_overrides({"terminal.cwd": str(tree),
                                      "files.denied_paths": [str(tree / "sub" / "deep")]})
    with ToolRegistry.with_builtins(config, plugins=False) as reg:
        assert "Access denied" in run(reg, "python", pattern="foo", path="sub/deep")["error"]
        out = both(reg, pattern="foo", limit=1000)
        assert not any(m["path"].startswith("sub/deep") for m in out["matches"])
        names = both(reg, pattern="*.py", target="files")
        assert "sub/deep/er/d.py" not in names["files"]
        assert "a.py" in names["files"]


def test_hit_cap_makes_the_count_a_lower_bound(reg, tree):
    from execengine.context import ToolContext

    scope = scope_of(ToolContext(reg, reg.config))
    answers = []
    for backend in ("python", "ripgrep") if HAVE_RG else ("python",):
        out = search(scope, {"pattern": "foo", "limit": 2}, backend=backend, max_hits=5)
        out.pop("backend")
        answers.append(out)
    assert all(a == answers[0] for a in answers)
    assert answers[0]["total_count"] == 5 and answers[0]["total_count_is_lower_bound"] is True
    assert "of 5+" in answers[0]["hint"]


def test_auto_uses_python_when_rg_is_absent(reg, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no rg on PATH
    out = json.loads(reg.dispatch("search_files", {"pattern": "TODO"}))
    assert out["backend"] == "python"
    assert out["matches"][0]["path"] == "a.py"


@needs_rg
def test_auto_prefers_ripgrep(reg):
    out = json.loads(reg.dispatch("search_files", {"pattern": "TODO"}))
    assert out["backend"] == "ripgrep"


def test_relative_paths_outside_cwd_are_absolute(reg, tree):
    out = both(reg, pattern="TODO", path=str(tree))
    assert out["matches"][0]["path"] == "a.py"
    other = Config().with_overrides({"terminal.cwd": str(tree / "sub")})
    with ToolRegistry.with_builtins(other, plugins=False) as r2:
        res = json.loads(r2.dispatch("search_files", {"pattern": "TODO", "path": ".."},
                                     CallContext(search_backend="python")))
    assert res["matches"][0]["path"] == os.path.join(str(tree), "a.py")
