"""File tools under an execution policy: a script's calls stay beneath the roots; the
agent's own calls (no policy) are the negative control and reach the same targets."""

from __future__ import annotations

import json
import os

import pytest

from execengine.config import Config
from execengine.confine.files import checked_open
from execengine.confine.policy import ExecutionPolicy
from execengine.context import CallContext
from execengine.errors import FileOpError
from execengine.fileops.paths import Scope
from execengine.fileops.textio import atomic_write
from execengine.registry import ToolRegistry


@pytest.fixture
def world(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("TOP SECRET\n")
    secret.chmod(0o600)
    (work / "mine.txt").write_text("hello\n")
    (work / "link_file").symlink_to(secret)
    (work / "link_dir").symlink_to(outside)
    return work, outside, secret


@pytest.fixture
def registry():
    reg = ToolRegistry.with_builtins(Config())
    yield reg
    reg.close()


def call(registry, work, tool, args, *, confined=True, config=None):
    policy = None
    if confined:
        policy = ExecutionPolicy.for_execution(config or Config(), cwd=str(work),
                                               level="restricted")
    context = CallContext(origin="execute_code", cwd=str(work), policy=policy)
    return json.loads(registry.dispatch(tool, args, context))


READS = [("read_file", {"path": "{secret}"}), ("read_file", {"path": "link_file"}),
         ("read_file", {"path": "link_dir/secret.txt"}),
         ("read_file", {"path": "../outside/secret.txt"}),
         ("search_files", {"pattern": "TOP", "path": "{outside}"}),
         ("search_files", {"pattern": "TOP", "path": "link_dir"})]


@pytest.mark.parametrize("tool,args", READS)
def test_reads_outside_the_roots_are_refused(registry, world, tool, args):
    work, outside, secret = world
    args = {k: v.format(secret=secret, outside=outside) for k, v in args.items()}
    # negative control: without a policy the same call reads the secret
    assert "TOP SECRET" in json.dumps(call(registry, work, tool, args, confined=False))
    res = call(registry, work, tool, args)
    assert "TOP SECRET" not in json.dumps(res)
    assert "Access denied" in res["error"], res


WRITES = [("write_file", {"path": "{outside}/new.txt", "content": "x"}),
          ("write_file", {"path": "link_dir/new.txt", "content": "x"}),
          ("write_file", {"path": "../outside/new.txt", "content": "x"}),
          ("patch", {"mode": "patch", "patch": "--- /dev/null\n+++ link_dir/new.txt\n"
                                                "@@ -0,0 +1 @@\n+x\n"})]


@pytest.mark.parametrize("tool,args", WRITES)
def test_writes_outside_the_roots_are_refused(registry, world, tool, args):
    work, outside, _ = world
    args = {k: v.format(outside=outside) for k, v in args.items()}
    res = call(registry, work, tool, args)
    assert not (outside / "new.txt").exists(), res
    assert "Access denied" in res["error"], res
    call(registry, work, tool, args, confined=False)  # negative control
    assert (outside / "new.txt").exists()


def test_writing_through_a_final_symlink_is_refused(registry, world):
    work, _, secret = world
    res = call(registry, work, "write_file", {"path": "link_file", "content": "pwned"})
    assert "symbolic link" in res["error"]
    assert secret.read_text() == "TOP SECRET\n"


def test_work_inside_the_roots_is_unchanged(registry, world):
    work, _, _ = world
    assert call(registry, work, "read_file", {"path": "mine.txt"})["content"].endswith("hello")
    assert call(registry, work, "write_file", {"path": "a/b/c.txt", "content": "x\n"})[
        "path"] == "a/b/c.txt"
    assert (work / "a" / "b" / "c.txt").read_text() == "x\n"
    res = call(registry, work, "patch", {"path": "mine.txt", "old_string": "hello",
                                         "new_string": "bye"})
    assert res["success"], res
    assert (work / "mine.txt").read_text() == "bye\n"
    res = call(registry, work, "search_files", {"pattern": "bye"})
    assert [m["path"] for m in res["matches"]] == ["mine.txt"]


@pytest.mark.parametrize("text", [
    "--- a/mine.txt\n+++ b/mine.txt\n@@ -1 +1 @@\n-hello\n+bye\n",
    "*** Begin Patch\n*** Update File: mine.txt\n@@\n-hello\n+bye\n*** End Patch\n"])
@pytest.mark.parametrize("confined", [True, False])
def test_a_patch_updating_a_file_keeps_it(registry, world, text, confined):
    """Confined, each path of a patch is anchored on a descriptor of its own, so a file's
    old and new paths differed and the update was taken for a move: the file was written,
    then deleted as the move's source."""
    work, _, _ = world
    res = call(registry, work, "patch", {"mode": "patch", "patch": text}, confined=confined)
    assert res["success"], res
    assert (work / "mine.txt").read_text() == "bye\n"
    # the same file named twice is still refused, confined or not
    again = text.replace("-hello\n+bye", "-bye\n+x")
    twice = again.replace("*** End Patch", "*** Update File: ./mine.txt\n@@\n-bye\n+y\n"
                          "*** End Patch") if "Begin" in text else again + again
    res = call(registry, work, "patch", {"mode": "patch", "patch": twice}, confined=confined)
    assert "twice" in res["error"], res
    assert (work / "mine.txt").read_text() == "bye\n"


def test_outside_the_writable_roots_only_world_readable_files(registry, world, tmp_path):
    work, outside, _ = world
    (outside / "public.txt").write_text("public\n")
    (outside / "public.txt").chmod(0o644)
    config = Config().with_overrides({"policy.readable_roots": [str(outside)]})
    res = call(registry, work, "read_file", {"path": str(outside / "public.txt")},
               config=config)
    assert "public" in res["content"], res
    res = call(registry, work, "read_file", {"path": str(outside / "secret.txt")},
               config=config)
    assert "world-readable" in res["error"]
    res = call(registry, work, "write_file", {"path": str(outside / "x"), "content": "x"},
               config=config)
    assert "writable roots" in res["error"]


def test_policy_protected_paths_are_never_written_by_the_tools(registry, world, tmp_path):
    work, _, _ = world
    (work / "keep").mkdir()
    (work / "results.jsonl").write_text("real\n")
    config = Config().with_overrides({"policy.protected_paths": [
        str(work / "results.jsonl"), str(work / "keep"), str(tmp_path / "elsewhere")]})
    policy = ExecutionPolicy.for_execution(config, cwd=str(work), level="restricted")
    # beneath a writable root only: a protected path elsewhere is outside them anyway
    assert str(tmp_path / "elsewhere") not in policy.protected
    for path in ("results.jsonl", "keep/new.txt"):
        res = call(registry, work, "write_file", {"path": path, "content": "forged\n"},
                   config=config)
        assert "protected path" in res["error"], res
    assert (work / "results.jsonl").read_text() == "real\n"
    assert not (work / "keep" / "new.txt").exists()
    assert "content" in call(registry, work, "read_file", {"path": "results.jsonl"},
                             config=config)  # read, not written


def test_the_config_file_and_credentials_are_always_denied(registry, tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    cfg_file = work / "config.yaml"
    cfg_file.write_text("approvals:\n  mode: ask\n")
    from execengine.config import load_config

    config = load_config(cfg_file)
    reg = ToolRegistry.with_builtins(config)
    try:
        for tool, args in [("read_file", {"path": "config.yaml"}),
                           ("write_file", {"path": "config.yaml", "content": "x"}),
                           ("read_file", {"path": os.path.expanduser("~/.ssh/id_rsa")})]:
            res = call(reg, work, tool, args, config=config)
            assert "error" in res and "Access denied" in res["error"], res
    finally:
        reg.close()
    assert cfg_file.read_text().startswith("approvals")


def test_agent_calls_follow_policy_agent_calls(world):
    work, _, secret = world
    for mode, leaks in (("unconfined", True), ("confined", False)):
        config = Config().with_overrides({"policy.agent_calls": mode})
        reg = ToolRegistry.with_builtins(config)
        try:
            res = reg.dispatch("read_file", {"path": str(secret)}, CallContext(cwd=str(work)))
        finally:
            reg.close()
        assert ("TOP SECRET" in res) is leaks, res


def _scope(work) -> Scope:
    policy = ExecutionPolicy.for_execution(Config(), cwd=str(work), level="isolated")
    return Scope.for_call(Config(), str(work), policy)


def test_an_anchored_write_lands_where_it_was_checked_even_after_a_swap(world):
    """The race a script could run: after the check, its folder is replaced by a link out.
    The write still lands in the folder that was checked (now renamed), never outside."""
    work, outside, _ = world
    (work / "d").mkdir()
    with _scope(work) as scope:
        target, _ = scope.path("d/f.txt", "writing")
        os.rename(work / "d", work / "d_moved")
        os.symlink(outside, work / "d")
        atomic_write(target, b"data")
    assert (work / "d_moved" / "f.txt").read_bytes() == b"data"
    assert not (outside / "f.txt").exists()


def test_a_read_is_verified_where_the_open_landed(world):
    """After the up-front check passed, the path is swapped for a link out: the open is
    verified on the fd and refused."""
    work, outside, _ = world
    (work / "d").mkdir()
    (work / "d" / "secret.txt").write_text("fine")
    with _scope(work) as scope:
        scope.path("d/secret.txt", "reading")
        os.rename(work / "d", work / "d_moved")
        os.symlink(outside, work / "d")
        with pytest.raises(FileOpError, match="outside"):
            checked_open(work / "d" / "secret.txt")
    # without an active confinement the same open succeeds (the probe works)
    os.close(checked_open(work / "d" / "secret.txt"))


def test_tools_leave_roots_and_level_none_are_unconfined(world):
    work, _, _ = world
    assert not ExecutionPolicy.for_execution(Config(), cwd=str(work), level="none").confined
    assert ExecutionPolicy.for_execution(Config(), cwd=str(work), level="restricted").confined
    loose = Config().with_overrides({"policy.tools_leave_roots": True})
    assert not ExecutionPolicy.for_execution(loose, cwd=str(work), level="isolated").confined
    strict = Config().with_overrides({"policy.confine_at_none": True})
    assert ExecutionPolicy.for_execution(strict, cwd=str(work), level="none").confined


@pytest.mark.parametrize("into", [".git", "keep"])
def test_a_link_swapped_into_a_protected_folder_during_the_walk_is_refused(
        registry, world, monkeypatch, into):
    """The path is checked, then its folders opened one by one: a script's thread that
    swaps a link from a plain folder to ``.git`` (or a listed protected folder) in between
    had ``write_file`` replace the host's ``.git/config`` (a red team won within a few
    calls). Where the opened folder really is is checked again; the swap is made here at
    the worst moment, deterministically."""
    from execengine.confine import files

    work, _, _ = world
    (work / ".git").mkdir()
    (work / ".git" / "config").write_text("[core]\n")
    (work / "keep").mkdir()
    (work / "ok").mkdir()
    (work / "link").symlink_to("ok")
    real_subdir = files.FileConfinement._subdir

    def swapped_first(self, cur, name, path, action, *rest):
        if name == "link" and (work / "link").resolve() == work / "ok":
            (work / "link").unlink()
            (work / "link").symlink_to(into)
        return real_subdir(self, cur, name, path, action, *rest)

    monkeypatch.setattr(files.FileConfinement, "_subdir", swapped_first)
    config = Config().with_overrides({"policy.protected_paths": [str(work / "keep")]})
    res = call(registry, work, "write_file", {"path": "link/config", "content": "pwned\n"},
               config=config)
    assert "protected path" in res.get("error", ""), res
    assert (work / ".git" / "config").read_text() == "[core]\n"
    assert not (work / "keep" / "config").exists()
    (work / "link").unlink()  # the negative control: a link to a plain folder is written
    (work / "link").symlink_to("ok")
    monkeypatch.setattr(files.FileConfinement, "_subdir", real_subdir)
    res = call(registry, work, "write_file", {"path": "link/config", "content": "fine\n"},
               config=config)
    assert "error" not in res and (work / "ok" / "config").read_text() == "fine\n", res
