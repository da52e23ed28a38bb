"""Every script-callable tool from a script running on the remote (a real sshd on loopback):
terminal, read_file, write_file, patch and search_files act on the remote user's files,
checked on disk, with the same results and path rules as locally."""

from __future__ import annotations

import json
import os
import pwd
from collections.abc import Iterator

import pytest

from execengine.config import Config
from execengine.engine import Engine
from execengine.registry import ToolRegistry

from .conftest import Remote

SCRIPT = r'''
import json
from hermes_tools import terminal, read_file, write_file, patch, search_files

out = {}
out["terminal"] = terminal("mkdir -p proj && id -un && pwd")
out["write"] = write_file("proj/notes.txt", "alpha\nbeta\ngamma\n")
out["read"] = read_file("proj/notes.txt", offset=2, limit=1)
out["patch"] = patch(path="proj/notes.txt", old_string="beta", new_string="BETA")
out["search"] = search_files("BETA", path="proj")
out["files"] = search_files("*.txt", target="files", path="proj")
out["missing"] = read_file("proj/notez.txt")
out["denied"] = read_file("~/.ssh/id_ed25519")
terminal("cd proj")
out["after_cd"] = read_file("notes.txt")
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def engine(remote: Remote) -> Iterator[Engine]:
    config = Config().with_overrides(remote.overrides(**{
        "code_execution.timeout": 60.0, "approvals.mode": "allow"}))
    reg = ToolRegistry.with_builtins(config)
    with Engine(config, reg) as eng:
        yield eng
    reg.close()
    assert remote.wait_no_processes() == []


def test_a_remote_script_calls_every_tool_on_remote_files(engine: Engine,
                                                           remote: Remote) -> None:
    r = engine.execute(SCRIPT, mode="project")
    assert r.status == "success", (r.error, r.stderr, r.output)
    out = json.loads(r.output)
    assert out["terminal"]["output"].splitlines() == [remote.user, str(remote.home)]
    assert out["write"] == {"path": "proj/notes.txt", "bytes_written": 17, "lines": 3,
                            "created": True}
    assert out["read"]["content"] == "     2|beta"
    assert out["patch"]["success"] is True and "+BETA" in out["patch"]["diff"]
    on_disk = remote.home / "proj" / "notes.txt"
    assert on_disk.read_text() == "alpha\nBETA\ngamma\n"
    assert on_disk.stat().st_uid == pwd.getpwnam(remote.user).pw_uid
    assert [m["line"] for m in out["search"]["matches"]] == [2]
    assert out["files"]["files"] == ["proj/notes.txt"]
    assert out["missing"]["suggestions"] == ["proj/notes.txt"]
    assert "File not found: 'proj/notez.txt'" in out["missing"]["error"]
    assert "Access denied" in out["denied"]["error"]  # ~ is the remote user's home
    # the terminal's cd moved the task's directory, for the file tools too
    assert out["after_cd"]["content"].startswith("     1|alpha")
    # only the file tools' server stays, until the registry closes
    left = remote.wait_no_processes()
    assert [" ".join(p.cmdline()) for p in left if "fileops.serve" not in
            " ".join(p.cmdline())] == []


def test_results_match_the_local_ones(engine: Engine, remote: Remote, tmp_path) -> None:
    """The same calls on the same tree give the same results here and on the remote."""
    tree = remote.home / "same"
    for root in (tree, tmp_path):
        (root / "src").mkdir(parents=True, exist_ok=True)
        (root / "src" / "a.py").write_text("def f():\n    return 1\n")
        (root / "README").write_text("x" * 10 + "\n")
    uid = pwd.getpwnam(remote.user).pw_uid
    for dirpath, dirs, files in os.walk(tree):
        for name in [dirpath, *(os.path.join(dirpath, n) for n in dirs + files)]:
            os.chown(name, uid, uid)
    calls = [
        ("read_file", {"path": "src/a.py"}),
        ("read_file", {"path": "src/a.py", "offset": 9}),
        ("read_file", {"path": "src"}),
        ("search_files", {"pattern": "return", "context": 1}),
        ("search_files", {"pattern": "*.py", "target": "files"}),
        ("patch", {"path": "src/a.py", "old_string": "return 1", "new_string": "return 2"}),
        ("patch", {"path": "src/a.py", "old_string": "nothere", "new_string": "x"}),
        ("write_file", {"path": "new/b.txt", "content": "b"}),
        ("read_file", {"path": "new/b.txt"}),
    ]
    from execengine.context import CallContext

    local = ToolRegistry.with_builtins(Config().with_overrides({"approvals.mode": "allow"}))
    try:
        for name, args in calls:
            here = json.loads(local.dispatch(name, args, CallContext(cwd=str(tmp_path))))
            there = json.loads(engine.registry.dispatch(name, args,
                                                        CallContext(cwd=str(tree))))
            here.pop("backend", None), there.pop("backend", None)
            assert there == here, name
    finally:
        local.close()
    assert (tree / "src" / "a.py").read_text() == "def f():\n    return 2\n"


def test_file_tools_reconnect_after_a_dropped_connection(engine: Engine,
                                                         remote: Remote) -> None:
    from execengine.context import CallContext

    reg = engine.registry
    ctx = CallContext(cwd=str(remote.home))
    assert "error" not in json.loads(reg.dispatch("write_file", {"path": "r.txt",
                                                                 "content": "x\n"}, ctx))
    reg.services.host.connection.drop()  # type: ignore[attr-defined]
    out = json.loads(reg.dispatch("read_file", {"path": "r.txt"}, ctx))
    assert out["content"] == "     1|x"
    out = json.loads(reg.dispatch("write_file", {"path": "r.txt", "content": "y\n"}, ctx))
    assert out["bytes_written"] == 2 and (remote.home / "r.txt").read_text() == "y\n"


def test_project_mode_scripts_run_where_the_task_is(engine: Engine, remote: Remote) -> None:
    """As locally: a project-mode script runs in its task's directory, which the terminal's
    cd moves (here a directory of the remote)."""
    (remote.home / "elsewhere").mkdir(exist_ok=True)
    os.chown(remote.home / "elsewhere", pwd.getpwnam(remote.user).pw_uid, -1)
    r = engine.execute("from hermes_tools import terminal\nterminal('cd elsewhere')\n",
                       mode="project", task_id="moving")
    assert r.status == "success", (r.error, r.stderr)
    r = engine.execute("import os\nprint(os.getcwd())", mode="project", task_id="moving")
    assert r.output.strip() == f"{remote.home}/elsewhere"
