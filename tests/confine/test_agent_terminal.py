"""The agent's own terminal with ``terminal.isolation``: each command in a sandbox of that
level, writable only in the task's working directory; ``none`` (the default) is the
negative control and runs on the host."""

from __future__ import annotations

import json

import pytest

from execengine.config import Config
from execengine.context import CallContext
from execengine.isolation.detect import detect
from execengine.registry import ToolRegistry

REPORT = detect()


@pytest.fixture
def world(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "secret").write_text("TOP SECRET\n")
    (private / "secret").chmod(0o600)
    canary = tmp_path / "canary"
    canary.mkdir()
    canary.chmod(0o777)
    return work, private / "secret", canary


def run(isolation, world, command):
    work, _, _ = world
    config = Config().with_overrides({"terminal.isolation": isolation,
                                      "terminal.cwd": str(work), "approvals.mode": "allow"})
    with ToolRegistry.with_builtins(config) as reg:
        return json.loads(reg.dispatch("terminal", {"command": command}, CallContext()))


@pytest.mark.parametrize("isolation", [
    "none",
    pytest.param("restricted", marks=pytest.mark.skipif(
        not REPORT.levels.get("restricted"), reason="level restricted unavailable")),
    pytest.param("isolated", marks=pytest.mark.skipif(
        not REPORT.levels.get("isolated"), reason="level isolated unavailable")),
])
def test_the_agents_terminal_can_be_sandboxed(isolation, world):
    work, secret, canary = world
    res = run(isolation, world, f"cat {secret}; echo x > {canary}/out; echo ok > here.txt; "
                                "echo done")
    assert "done" in res["output"], res
    assert (work / "here.txt").read_text() == "ok\n"  # the task's folder stays writable
    leaked = "TOP SECRET" in res["output"] or (canary / "out").exists()
    if isolation == "none":
        assert leaked and "sandbox" not in res
        return
    assert not leaked, res
    assert res["sandbox"] == isolation
    config = Config().with_overrides({"terminal.isolation": isolation,
                                      "terminal.cwd": str(work)})
    with ToolRegistry.with_builtins(config) as reg:
        bg = json.loads(reg.dispatch("terminal", {"command": "sleep 1", "background": True},
                                     CallContext()))
    assert "not available in the sandboxed terminal" in bg["error"]


@pytest.mark.skipif(not REPORT.levels.get("restricted"), reason="level restricted unavailable")
def test_cd_sticks_but_never_widens_what_is_writable(world):
    work, _, canary = world
    config = Config().with_overrides({"terminal.isolation": "restricted",
                                      "terminal.cwd": str(work), "approvals.mode": "allow"})
    with ToolRegistry.with_builtins(config) as reg:
        def sh(command):
            return json.loads(reg.dispatch("terminal", {"command": command}, CallContext()))

        # made here, writable by every uid (a command acts in the folder as its owner as
        # root; a host that is not root runs them all as its own uid)
        (work / "sub").mkdir()
        (work / "sub").chmod(0o777)
        assert sh("cd sub")["cwd"] == str(work / "sub")
        assert sh("pwd")["output"].strip() == str(work / "sub")
        sh(f"cd {canary}")  # outside the roots: where commands start stays put
        res = sh("pwd; echo x > escaped")
        assert res["output"].splitlines()[0] == str(work / "sub"), res
        assert (work / "sub" / "escaped").exists() and not (canary / "escaped").exists()


@pytest.mark.parametrize("isolation", [
    pytest.param(lv, marks=pytest.mark.skipif(
        not (REPORT.levels.get(lv) and REPORT.has("cgroups")),
        reason=f"level {lv} with cgroups unavailable: {REPORT.reasons.get(lv)}"))
    for lv in ("restricted", "isolated")])
def test_a_command_killed_for_memory_says_so(isolation, world):
    work, _, _ = world
    hog = ("python3 -c 'import mmap; m = mmap.mmap(-1, 256 << 20)\n"
           "for i in range(0, len(m), 4096): m[i] = 1'; echo rc=$?")
    config = Config().with_overrides({"terminal.isolation": isolation,
                                      "terminal.cwd": str(work), "approvals.mode": "allow",
                                      "code_execution.memory_mb": 64})
    with ToolRegistry.with_builtins(config) as reg:
        res = json.loads(reg.dispatch("terminal", {"command": hog}, CallContext()))
        fine = json.loads(reg.dispatch("terminal", {"command": "echo fine"}, CallContext()))
    assert "rc=137" in res["output"], res
    assert res["output"].endswith("[A process of the command was killed: out of memory "
                                  "(limit 64 MiB, code_execution.memory_mb).]"), res
    assert fine["output"].strip() == "fine"  # the negative control: no such note


SANDBOXED = [pytest.param(lv, marks=pytest.mark.skipif(
    not REPORT.levels.get(lv), reason=f"level {lv} unavailable: {REPORT.reasons.get(lv)}"))
    for lv in ("restricted", "isolated")]


@pytest.mark.parametrize("isolation", SANDBOXED)
def test_a_folder_one_command_made_is_the_next_commands_in_another_slot(isolation, world):
    """Each command acts in the task's folder as its owner: a folder one command made
    (0755) is written by the next although it runs as another slot uid (before, it was the
    first slot's own, and the next one's write failed)."""
    from tests.isolation._slots import another_slot_next

    work, _, _ = world
    config = Config().with_overrides({"terminal.isolation": isolation,
                                      "terminal.cwd": str(work), "approvals.mode": "allow"})
    with ToolRegistry.with_builtins(config) as reg:
        def sh(command):
            return json.loads(reg.dispatch("terminal", {"command": command}, CallContext()))

        first = sh("mkdir made && id -u")
        uid = int(first["output"].strip())
        with another_slot_next(uid):
            second = sh("id -u; echo x > made/file && echo wrote")
    assert int(second["output"].split()[0]) != uid, (first, second)
    assert second["output"].split()[1:] == ["wrote"], second
    assert (work / "made" / "file").read_text() == "x\n"
    assert (work / "made").stat().st_uid == work.stat().st_uid  # the folder's owner's


@pytest.mark.parametrize("isolation", SANDBOXED)
def test_the_agents_sandboxed_terminal_refuses_a_home_folder(isolation, tmp_path):
    """Its commands would act there as the owner (``.bashrc``...): refused, naming the
    setting; at ``none`` (the negative control) the same folder is used."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("# start-up\n")

    def run_in(level, **over):
        config = Config().with_overrides({"terminal.isolation": level,
                                          "terminal.cwd": str(home), "approvals.mode": "allow",
                                          **over})
        with ToolRegistry.with_builtins(config) as reg:
            return json.loads(reg.dispatch("terminal", {"command": "echo ran"},
                                           CallContext()))

    refused = run_in(isolation)
    assert "policy.allow_home_workdir" in refused.get("error", ""), refused
    assert run_in("none")["output"].strip() == "ran"
    allowed = run_in(isolation, **{"policy.allow_home_workdir": True})
    assert allowed["output"].strip() == "ran", allowed
