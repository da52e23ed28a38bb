"""patch (replace and unified-diff modes) through the real registry and dispatcher."""

from __future__ import annotations

import difflib
import json
import random
from pathlib import Path

import pytest

from execengine.config import Config
from execengine.registry import ToolRegistry


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "s.txt").write_text("a\n")
    return tmp_path / "work"


@pytest.fixture
def reg(work: Path):
    config = Config().with_overrides({
        "terminal.cwd": str(work),
        "files.denied_paths": [str(work.parent / "secret")],
    })
    with ToolRegistry.with_builtins(config, plugins=False) as r:
        yield r


def patch(reg: ToolRegistry, **args):
    return json.loads(reg.dispatch("patch", args))


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


CODE = "def f():\n    return 1\n\n\ndef g():\n    return 1\n"

# -- replace mode ---------------------------------------------------------------------------


def test_unique_replacement_returns_a_diff(reg, work):
    (work / "m.py").write_text(CODE)
    out = patch(reg, path="m.py", old_string="def g():\n    return 1",
                new_string="def g():\n    return 2")
    assert out["success"] is True and out["replacements"] == 1 and out["match"] == "exact"
    assert out["lines"] == [5]
    assert "-    return 1\n+    return 2\n" in out["diff"]
    assert out["diff"].startswith("--- a/m.py\n+++ b/m.py\n")
    assert (work / "m.py").read_text() == CODE[:-2] + "2\n"


def test_non_unique_shows_candidate_lines_and_changes_nothing(reg, work):
    (work / "m.py").write_text(CODE)
    out = patch(reg, path="m.py", old_string="return 1", new_string="return 2")
    assert out["success"] is False
    assert "2 matches, at lines 2, 6" in out["error"]
    assert out["candidate_lines"] == [2, 6]
    assert (work / "m.py").read_text() == CODE


def test_replace_all(reg, work):
    (work / "m.py").write_text(CODE)
    out = patch(reg, path="m.py", old_string="return 1", new_string="return 0",
                replace_all=True)
    assert out["replacements"] == 2 and out["lines"] == [2, 6]
    assert (work / "m.py").read_text() == CODE.replace("return 1", "return 0")


def test_missing_old_string_points_at_the_closest_passage(reg, work):
    (work / "m.py").write_text(CODE)
    out = patch(reg, path="m.py", old_string="def g():\n    return 11", new_string="x")
    assert out["success"] is False
    assert "old_string not found in 'm.py'" in out["error"]
    assert out["closest_line"] == 5
    assert (work / "m.py").read_text() == CODE
    far = patch(reg, path="m.py", old_string="completely unrelated", new_string="x")
    assert "Re-read the file" in far["error"]


def test_whitespace_tolerant_fallback_says_it_was_used(reg, work):
    (work / "m.py").write_text("class A:\n    def f(self):   \n        return 1\n")
    out = patch(reg, path="m.py", old_string="def f(self):\n    return 1",
                new_string="def f(self):\n    x = 2\n    return x")
    assert out["success"] is True
    assert out["match"].startswith("whitespace-tolerant")
    assert "did not match exactly" in out["note"]
    assert (work / "m.py").read_text() == (
        "class A:\n    def f(self):\n        x = 2\n        return x\n")


def test_trailing_whitespace_only_difference(reg, work):
    (work / "t.txt").write_text("alpha  \nbeta\n")
    out = patch(reg, path="t.txt", old_string="alpha\nbeta", new_string="gamma\nbeta")
    assert out["match"] == "whitespace-tolerant (trailing whitespace ignored)"
    assert (work / "t.txt").read_text() == "gamma\nbeta\n"


def test_crlf_file_stays_crlf(reg, work):
    (work / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    out = patch(reg, path="w.txt", old_string="one\ntwo", new_string="uno\ndos")
    assert out["success"] is True
    assert (work / "w.txt").read_bytes() == b"uno\r\ndos\r\nthree\r\n"


@pytest.mark.parametrize(("args", "message"), [
    ({"old_string": "", "new_string": "x"}, "old_string must not be empty"),
    ({"old_string": "a", "new_string": "a"}, "identical"),
    ({"new_string": "x"}, "old_string must be a string"),
    ({"old_string": "a"}, "new_string must be a string"),
    ({"old_string": "a", "new_string": "b", "replace_all": "yes"}, "replace_all must be"),
    ({"old_string": "a", "new_string": "b", "mode": "sed"}, "mode must be 'replace' or"),
])
def test_bad_replace_arguments(reg, work, args, message):
    (work / "f.txt").write_text("a\n")
    out = patch(reg, path="f.txt", **args)
    assert out["success"] is False and message in out["error"]
    assert (work / "f.txt").read_text() == "a\n"


def test_missing_binary_and_undecodable_files(reg, work):
    (work / "notes.md").write_text("x\n")
    out = patch(reg, path="note.md", old_string="x", new_string="y")
    assert out["suggestions"] == ["notes.md"]
    (work / "b.bin").write_bytes(b"\x00\x01x")
    assert "binary file" in patch(reg, path="b.bin", old_string="x", new_string="y")["error"]
    (work / "l1.txt").write_bytes(b"caf\xe9 x\n")
    out = patch(reg, path="l1.txt", old_string="x", new_string="y")
    assert "not valid UTF-8" in out["error"]
    assert (work / "l1.txt").read_bytes() == b"caf\xe9 x\n"


def test_replace_in_denied_path_is_refused(reg, work):
    (work / "ln").symlink_to(work.parent / "secret")
    for path in ("../secret/s.txt", "ln/s.txt"):
        out = patch(reg, path=path, old_string="a", new_string="b")
        assert "Access denied" in out["error"]
    assert (work.parent / "secret" / "s.txt").read_text() == "a\n"


# -- patch mode -----------------------------------------------------------------------------


MULTI = """\
diff --git a/m.py b/m.py
--- a/m.py
+++ b/m.py
@@ -1,2 +1,2 @@
 def f():
-    return 1
+    return 10
diff --git a/old.txt b/old.txt
deleted file mode 100644
--- a/old.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-bye
-now
diff --git a/pkg/new.txt b/pkg/new.txt
new file mode 100644
--- /dev/null
+++ b/pkg/new.txt
@@ -0,0 +1,2 @@
+fresh
+file
"""


def test_multi_file_modify_create_delete(reg, work):
    (work / "m.py").write_text(CODE)
    (work / "old.txt").write_text("bye\nnow\n")
    out = patch(reg, mode="patch", patch=MULTI)
    assert out["success"] is True, out
    assert out["files"] == [
        {"path": "m.py", "action": "modified", "hunks": 1},
        {"path": "old.txt", "action": "deleted", "hunks": 1},
        {"path": "pkg/new.txt", "action": "created", "hunks": 1},
    ]
    assert (work / "m.py").read_text() == CODE.replace("return 1", "return 10", 1)
    assert not (work / "old.txt").exists()
    assert (work / "pkg" / "new.txt").read_text() == "fresh\nfile\n"
    assert "+++ /dev/null" in out["diff"] and "--- /dev/null" in out["diff"]


def test_a_failing_hunk_changes_no_file(reg, work):
    (work / "m.py").write_text(CODE)
    (work / "old.txt").write_text("bye\nnow\n")
    bad = MULTI.replace("-now\n", "-later\n")
    before = snapshot(work)
    out = patch(reg, mode="patch", patch=bad)
    assert out["success"] is False
    assert "'old.txt' hunk 1 of 1" in out["error"] and "No file was changed" in out["error"]
    assert out["failed_file"] == "old.txt" and out["failed_hunk"] == 1
    assert "expected 'later' at line 2, found 'now'" in out["error"]
    assert snapshot(work) == before
    assert not (work / "pkg").exists()


def test_second_hunk_failing_reports_its_number(reg, work):
    lines = [f"l{i}" for i in range(1, 31)]
    (work / "n.txt").write_text("\n".join(lines) + "\n")
    text = ("--- a/n.txt\n+++ b/n.txt\n@@ -2,3 +2,3 @@\n l2\n-l3\n+L3\n l4\n"
            "@@ -20,3 +20,3 @@\n l20\n-nope\n+X\n l22\n")
    out = patch(reg, mode="patch", patch=text)
    assert out["failed_hunk"] == 2 and "hunk 2 of 2" in out["error"]
    assert (work / "n.txt").read_text() == "\n".join(lines) + "\n"


def test_shifted_line_numbers_wrong_counts_and_stripped_blank_context(reg, work):
    (work / "s.py").write_text("import os\n\n\ndef main():\n    pass\n\n\nmain()\n")
    # hunk claims line 1 and wrong counts; the blank context line lost its leading space
    text = "--- a/s.py\n+++ b/s.py\n@@ -1,9 +1,9 @@\n def main():\n-    pass\n+    print(1)\n\n"
    out = patch(reg, mode="patch", patch=text)
    assert out["success"] is True, out
    assert (work / "s.py").read_text() == "import os\n\n\ndef main():\n    print(1)\n\n\nmain()\n"


def test_no_newline_at_end_of_file(reg, work):
    (work / "e.txt").write_text("a\nb")
    text = ("--- a/e.txt\n+++ b/e.txt\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n"
            "+c\n")
    assert patch(reg, mode="patch", patch=text)["success"] is True
    assert (work / "e.txt").read_text() == "a\nc\n"
    back = ("--- a/e.txt\n+++ b/e.txt\n@@ -1,2 +1,2 @@\n a\n-c\n+d\n"
            "\\ No newline at end of file\n")
    assert patch(reg, mode="patch", patch=back)["success"] is True
    assert (work / "e.txt").read_text() == "a\nd"


def test_rename_with_edit(reg, work):
    (work / "a.txt").write_text("one\ntwo\n")
    text = "--- a/a.txt\n+++ b/b.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"
    out = patch(reg, mode="patch", patch=text)
    assert out["files"] == [{"path": "b.txt", "action": "renamed", "hunks": 1}]
    assert not (work / "a.txt").exists()
    assert (work / "b.txt").read_text() == "one\n2\n"


@pytest.mark.parametrize(("text", "message"), [
    ("just some prose", "no '--- a/<file>' / '+++ b/<file>' header"),
    ("@@ -1 +1 @@\n-a\n+b\n", "hunk before any"),
    ("--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n?b\n+c\n", "does not start with"),
    ("--- a/f.txt\n+++ b/f.txt\n", "no hunks for 'f.txt'"),
    ("--- /dev/null\n+++ /dev/null\n@@ -0,0 +1 @@\n+x\n", "both sides are /dev/null"),
    ("", "needs the patch text"),
])
def test_malformed_patches_change_nothing(reg, work, text, message):
    (work / "f.txt").write_text("a\nb\n")
    out = patch(reg, mode="patch", patch=text)
    assert out["success"] is False and message in out["error"]
    assert (work / "f.txt").read_text() == "a\nb\n"


def test_create_over_existing_and_modify_missing(reg, work):
    (work / "here.txt").write_text("x\n")
    out = patch(reg, mode="patch", patch="--- /dev/null\n+++ b/here.txt\n@@ -0,0 +1 @@\n+y\n")
    assert "already exists" in out["error"]
    out = patch(reg, mode="patch", patch="--- a/gone.txt\n+++ b/gone.txt\n@@ -1 +1 @@\n-a\n+b\n")
    assert "does not exist" in out["error"]
    assert (work / "here.txt").read_text() == "x\n"


def test_patch_touching_a_denied_path_changes_nothing(reg, work):
    (work / "ok.txt").write_text("a\n")
    text = ("--- a/ok.txt\n+++ b/ok.txt\n@@ -1 +1 @@\n-a\n+b\n"
            "--- a/../secret/s.txt\n+++ b/../secret/s.txt\n@@ -1 +1 @@\n-a\n+b\n")
    out = patch(reg, mode="patch", patch=text)
    assert "Access denied" in out["error"]
    assert (work / "ok.txt").read_text() == "a\n"
    assert (work.parent / "secret" / "s.txt").read_text() == "a\n"


def test_difflib_diffs_round_trip(reg, work):
    rng = random.Random(5)
    words = ["alpha", "beta", "", "    indented", "gamma", "}", "return x"]
    for round_ in range(40):
        before = [rng.choice(words) + f" {rng.randrange(5)}" for _ in range(rng.randrange(1, 60))]
        after = list(before)
        for _ in range(rng.randrange(1, 6)):
            op = rng.randrange(3)
            at = rng.randrange(len(after) + 1)
            if op == 0:
                after.insert(at, f"new {round_}")
            elif op == 1 and after:
                del after[min(at, len(after) - 1)]
            elif after:
                after[min(at, len(after) - 1)] += " changed"
        old_text = "\n".join(before) + "\n"
        new_text = "\n".join(after) + "\n" if after else ""
        (work / "r.txt").write_text(old_text)
        diff = "".join(difflib.unified_diff(old_text.splitlines(True), new_text.splitlines(True),
                                            "a/r.txt", "b/r.txt"))
        if not diff:
            continue
        out = patch(reg, mode="patch", patch=diff)
        assert out["success"] is True, (round_, out)
        assert (work / "r.txt").read_text() == new_text, round_


V4A = """\
*** Begin Patch
*** Update File: m.py
@@ def g():
-    return 1
+    return 2
*** Add File: docs/new.md
+# New
+text
*** Delete File: old.txt
*** End Patch
"""


def test_begin_patch_envelope(reg, work):
    (work / "m.py").write_text(CODE)
    (work / "old.txt").write_text("bye\n")
    out = patch(reg, mode="patch", patch=V4A)
    assert out["success"] is True, out
    assert [f["action"] for f in out["files"]] == ["modified", "created", "deleted"]
    # the anchor picks the second 'return 1', after 'def g():'
    assert (work / "m.py").read_text() == CODE[:-2] + "2\n"
    assert (work / "docs" / "new.md").read_text() == "# New\ntext\n"
    assert not (work / "old.txt").exists()
    assert "-bye\n" in out["diff"]


def test_begin_patch_failure_changes_nothing(reg, work):
    (work / "m.py").write_text(CODE)
    (work / "old.txt").write_text("bye\n")
    before = snapshot(work)
    out = patch(reg, mode="patch", patch=V4A.replace("-    return 1", "-    return 9"))
    assert out["success"] is False and out["failed_file"] == "m.py"
    assert snapshot(work) == before
    out = patch(reg, mode="patch", patch="*** Begin Patch\n*** Update File: m.py\n-x\n")
    assert "without '*** End Patch'" in out["error"]
