"""write_file through the real registry and dispatcher."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from execengine.config import Config
from execengine.registry import ToolRegistry


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    (tmp_path / "secret").mkdir()
    return tmp_path / "work"


@pytest.fixture
def reg(work: Path):
    config = Config().with_overrides({
        "terminal.cwd": str(work),
        "files.denied_paths": [str(work.parent / "secret")],
    })
    with ToolRegistry.with_builtins(config, plugins=False) as r:
        yield r


def write(reg: ToolRegistry, **args):
    return json.loads(reg.dispatch("write_file", args))


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob(".*.tmp"))


def test_creates_parents_and_reports_bytes(reg, work):
    out = write(reg, path="a/b/c.txt", content="héllo\nwörld\n")
    assert out == {"path": os.path.join("a", "b", "c.txt"), "bytes_written": 14, "lines": 2,
                   "created": True}
    assert (work / "a" / "b" / "c.txt").read_bytes() == "héllo\nwörld\n".encode()
    again = write(reg, path="a/b/c.txt", content="x")
    assert again["created"] is False and again["bytes_written"] == 1
    assert (work / "a" / "b" / "c.txt").read_text() == "x"
    assert leftovers(work) == []


def test_absolute_path_outside_cwd_is_shown_absolute(reg, work, tmp_path):
    target = tmp_path / "elsewhere.txt"
    out = write(reg, path=str(target), content="")
    assert out["path"] == str(target) and out["bytes_written"] == 0
    assert target.read_text() == ""


def test_overwrite_keeps_the_file_mode(reg, work):
    f = work / "run.sh"
    f.write_text("old\n")
    f.chmod(0o750)
    write(reg, path="run.sh", content="#!/bin/sh\necho new\n")
    assert stat.S_IMODE(f.stat().st_mode) == 0o750
    assert f.read_text() == "#!/bin/sh\necho new\n"


def test_new_file_gets_the_umask_mode(reg, work):
    old = os.umask(0o027)
    try:
        write(reg, path="n.txt", content="x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((work / "n.txt").stat().st_mode) == 0o640


def test_writes_through_a_symlink_and_keeps_it(reg, work):
    (work / "real.txt").write_text("old")
    (work / "link.txt").symlink_to("real.txt")
    write(reg, path="link.txt", content="new")
    assert (work / "link.txt").is_symlink()
    assert (work / "real.txt").read_text() == "new"


@pytest.mark.parametrize(("args", "message"), [
    ({"path": "x.txt"}, "content must be a string, got nothing"),
    ({"path": "x.txt", "content": 5}, "content must be a string, got int"),
    ({"content": "x"}, "path must be a string"),
    ({"path": "  ", "content": "x"}, "path must be a non-empty string"),
])
def test_bad_arguments_write_nothing(reg, work, args, message):
    out = write(reg, **args)
    assert message in out["error"]
    assert list(work.iterdir()) == []


def test_directory_and_file_as_parent_are_errors(reg, work):
    (work / "d").mkdir()
    assert "is a directory" in write(reg, path="d", content="x")["error"]
    (work / "plain").write_text("keep")
    out = write(reg, path="plain/child.txt", content="x")
    assert "parent is not a directory" in out["error"]
    assert (work / "plain").read_text() == "keep"


def test_denied_locations_are_refused_and_untouched(reg, work):
    secret = work.parent / "secret"
    (work / "via").symlink_to(secret)
    for path in (str(secret / "k"), "../secret/k", "via/k", "via/new/deeper/k",
                 "x/../../secret/k"):
        out = write(reg, path=path, content="pwned")
        assert "Access denied" in out["error"], path
    assert list(secret.iterdir()) == []
    assert not (work / "x").exists()


CHILD = r"""
import json, sys
from execengine.config import Config
from execengine.registry import ToolRegistry
reg = ToolRegistry.with_builtins(Config().with_overrides({"terminal.cwd": sys.argv[1]}),
                                 plugins=False)
big = "N" * (64 * 1024 * 1024)
print("ready", flush=True)
while True:
    reg.dispatch("write_file", {"path": "target.txt", "content": big})
"""


def test_killed_mid_write_leaves_old_or_new_never_half(work):
    target = work / "target.txt"
    target.write_text("OLD" * 1000)
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(work)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(0.3)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=10)
        assert proc.stdout is not None
        proc.stdout.close()
    data = target.read_bytes()
    assert data in (b"OLD" * 1000, b"N" * (64 * 1024 * 1024))
    for tmp in work.glob(".target.txt.*.tmp"):  # the killed writer's staging file
        tmp.unlink()
