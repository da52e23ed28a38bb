"""Red team: a hostile working directory (a batch task's ``cwd``, an API caller's).

A sandbox acts in its working directory as the folder's owner (an id-mapped bind). Given
``/`` or ``/etc``, that is renaming ``/usr`` or creating ``/etc/ld.so.preload``: a system
folder, or one in a denied path, is refused before anything starts
(execengine/host/confinement.py).

The negative control: an ordinary root-owned 0755 folder as the working directory *is*
writable by the sandbox (the grant the refusal keeps away from system folders).

A home folder (or one holding a home's files: ``.ssh``, shell start-up files,
``.gitconfig``) is refused too, unless ``policy.allow_home_workdir``: there the script,
as the owner, would read ``~/.ssh`` and plant what the owner's next login runs. With the
setting (the control) it does read the owner's private key.
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from execengine.batch import LocalExecutor
from execengine.batch.task import Task
from execengine.config import Config
from execengine.engine.core import Engine
from execengine.errors import InvalidArgumentError, SandboxError

from .conftest import level_params

SANDBOXED = [p for p in level_params() if p.values[0] != "none"]
LEVEL = level_params()
#: the owner of the homes these tests make
USER = 4242


def _config(level: str, **over: object) -> Config:
    return Config().with_overrides({
        "code_execution.isolation": level, "code_execution.min_isolation": level,
        "code_execution.mode": "project", "code_execution.timeout": 30,
        "approvals.execute_code": "allow", **over})


PROBE = """
import os
name = "execengine-redteam-probe"
try:
    open(name, "w").close()
    os.unlink(name)
    print("WROTE")
except OSError as exc:
    print("REFUSED", exc)
"""


@pytest.mark.parametrize("cwd", ["/", "/etc", "/usr/lib", "/var", "~/.ssh",
                                 # what root runs later: the next apt run's maintainer
                                 # scripts, cron's tables, runtime state
                                 "/var/lib/dpkg/info", "/var/spool/cron/crontabs",
                                 "/run/lock"])
@pytest.mark.parametrize("level", SANDBOXED)
def test_a_system_folder_is_never_a_sandboxs_working_directory(level, cwd, tmp_path):
    path = os.path.expanduser(cwd)
    # a folder that is not there (a host without ~/.ssh) is refused as an argument
    refused = ((SandboxError, "working directory") if os.path.isdir(path)
               else (InvalidArgumentError, "does not exist"))
    with Engine(_config(level)) as engine:
        with pytest.raises(refused[0], match=refused[1]):
            engine.execute(PROBE, cwd=path)
        with pytest.raises(refused[0], match=refused[1]):
            engine.execute(PROBE, cwd=path, session="s")
        # negative control: an ordinary folder of root's, 0755, is the sandbox's to write
        plain = tmp_path / "project"
        plain.mkdir(mode=0o755)
        r = engine.execute(PROBE, cwd=str(plain))
    assert r.status == "success" and "WROTE" in r.output, (r.error, r.output)


@pytest.mark.parametrize("level", SANDBOXED)
def test_a_hostile_batch_task_cwd_is_an_error_result(level, tmp_path):
    plain = tmp_path / "project"
    plain.mkdir()
    tasks = [Task(id="evil", code=PROBE, cwd="/etc", line=1),
             Task(id="fine", code="print('ok')", cwd=str(plain), line=2)]
    with LocalExecutor(config=_config(level), concurrency=2) as executor:
        outcomes = {o.id: o for o in executor.run(tasks)}
    evil, fine = outcomes["evil"], outcomes["fine"]
    assert evil.status == "error", evil
    assert "system folder" in json.dumps(evil.to_dict() if hasattr(evil, "to_dict")
                                          else vars(evil), default=str), evil
    assert fine.status == "success", fine


READ_PRIVATE = """
try:
    print("READ:", open(".ssh/id_rsa").read().strip())
except OSError as exc:
    print("REFUSED:", type(exc).__name__)
"""


@pytest.mark.parametrize("level", LEVEL)
@pytest.mark.parametrize("marker", [".ssh/id_rsa", ".bashrc", ".gitconfig", ".profile"])
def test_a_home_folder_is_refused_unless_allowed(level, marker, tmp_path):
    """A folder holding what a home holds is refused at every sandboxed level, with the
    setting that allows it named; allowed, the script reads the owner's private key there
    (it acts as the owner). At level ``none`` (the negative control) nothing is refused:
    the script is the engine's own uid, and reads it."""
    work = tmp_path / "home"
    (work / ".ssh").mkdir(parents=True, mode=0o700)
    (work / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    (work / ".ssh" / "id_rsa").chmod(0o600)
    if marker != ".ssh/id_rsa":
        (work / marker).write_text("# start-up\n")
        (work / ".ssh" / "id_rsa").rename(work / "id_rsa")
        (work / ".ssh").rmdir()
        code = READ_PRIVATE.replace(".ssh/id_rsa", "id_rsa")
    else:
        code = READ_PRIVATE
    with Engine(_config(level)) as engine:
        if level == "none":
            r = engine.execute(code, cwd=str(work))
            assert "READ: PRIVATE KEY" in r.output, (r.error, r.output)
            return
        for session in (None, "s"):
            with pytest.raises(SandboxError, match="policy.allow_home_workdir") as info:
                engine.execute(code, cwd=str(work), session=session)
            assert marker.split("/")[0] in str(info.value)
    with Engine(_config(level, **{"policy.allow_home_workdir": True})) as engine:
        r = engine.execute(code, cwd=str(work))
    assert r.status == "success", (r.error, r.stderr)
    assert "READ: PRIVATE KEY" in r.output, r.output


@pytest.mark.parametrize("level", SANDBOXED)
def test_a_users_home_and_a_folder_holding_one_are_refused(level, tmp_path, monkeypatch):
    """The engine's own home (``~``), and a folder a home lies in, are refused although
    they hold no start-up file."""
    home = tmp_path / "users" / "someone"
    home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    with Engine(_config(level)) as engine:
        for cwd in (home, home.parent):
            with pytest.raises(SandboxError, match="home folder.*policy.allow_home_workdir"):
                engine.execute(PROBE, cwd=str(cwd))
        other = tmp_path / "project"
        other.mkdir()
        r = engine.execute(PROBE, cwd=str(other))  # the control: an ordinary folder
    assert r.status == "success" and "WROTE" in r.output, (r.error, r.output)


PLANT_GIT_CONFIG = """
import os
os.makedirs("git", exist_ok=True)
with open("git/config", "w") as fh:
    fh.write("[core]\\n\\tfsmonitor = touch /tmp/execengine-redteam-pwned\\n")
print("PLANTED", os.stat("git/config").st_uid)
"""


@pytest.mark.parametrize("level", LEVEL)
@pytest.mark.parametrize("inside", [".config", ".local/bin", "bin"])
def test_a_homes_hidden_folders_are_refused_unless_allowed(level, inside, tmp_path,
                                                           monkeypatch):
    """A red team gave ``~/.config`` as the working directory (neither a home nor holding
    one's start-up files): the script, acting there as the home's owner, wrote
    ``~/.config/git/config`` with a ``core.fsmonitor`` command, which the user's next
    ``git status`` anywhere runs (``~/.local/bin`` and ``~/bin`` are on the user's
    ``PATH``). A folder in a home's hidden folders or its ``bin`` is refused now, with the
    setting named; allowed, the script plants the file as the owner. At level ``none``
    (the negative control) nothing is refused and the plant lands."""
    home = tmp_path / "users" / "someone"
    cwd = home / inside
    cwd.mkdir(parents=True)
    here = cwd
    while here != home.parent:
        os.chown(here, USER, USER)
        here = here.parent
    monkeypatch.setenv("HOME", str(home))
    planted = cwd / "git" / "config"
    with Engine(_config(level)) as engine:
        if level == "none":
            r = engine.execute(PLANT_GIT_CONFIG, cwd=str(cwd))
            assert "PLANTED" in r.output and planted.exists(), (r.error, r.output)
            return
        for session in (None, "s"):
            with pytest.raises(SandboxError, match="home folder.*policy.allow_home_workdir"):
                engine.execute(PLANT_GIT_CONFIG, cwd=str(cwd), session=session)
        assert not planted.exists()
        project = home / "src" / "app"  # a project elsewhere in the home is fine
        project.mkdir(parents=True)
        r = engine.execute(PROBE, cwd=str(project))
        assert r.status == "success" and "WROTE" in r.output, (r.error, r.output)
    with Engine(_config(level, **{"policy.allow_home_workdir": True})) as engine:
        r = engine.execute(PLANT_GIT_CONFIG, cwd=str(cwd))
    assert r.status == "success", (r.error, r.stderr)
    assert planted.stat().st_uid == USER, r.output


SWAPPER = """
import os, time
deadline = time.monotonic() + 50
swaps = 0
while not os.path.exists("stop") and time.monotonic() < deadline:
    os.rename("sub", "sub.real")
    os.symlink({victim!r}, "sub")
    time.sleep(0.0005)
    os.unlink("sub")
    os.rename("sub.real", "sub")
    time.sleep(0.0005)
    swaps += 1
print("SWAPS", swaps)
"""

LAND = """
import os
open("landed-%d" % os.getpid(), "w").write("x")
print("LANDED", os.getcwd())
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("level", LEVEL)
def test_a_working_directory_swapped_for_a_link_after_its_check(level, tmp_path):
    """Two executions share a project: one runs in ``proj``, the next in ``proj/sub``. A
    red team's script in ``proj`` swapped ``sub`` for a link to a denied folder and back,
    again and again: a launch whose check saw the folder and whose bind then followed the
    link ran in the denied folder, writable, as its owner (with ``/etc`` there, root's
    ``/etc``). Now the working directory is resolved once, checked, and bound as resolved
    through no link (a link swapped in since fails that launch, as does an ACL grant by
    name). The control that the window was hit: some launches are refused for exactly
    that. Level ``none`` (the negative control): the script lands in the denied folder."""
    project = tmp_path / "proj"
    (project / "sub").mkdir(parents=True)
    victim = tmp_path / "denied"
    victim.mkdir()
    config = _config(level, **{"files.denied_paths": [str(victim)],
                               "code_execution.timeout": 60})
    landed = lambda: [n for n in os.listdir(victim) if n.startswith("landed-")]  # noqa: E731
    raced = 0
    with Engine(config) as engine:
        result: dict[str, object] = {}
        swapper = threading.Thread(target=lambda: result.setdefault(
            "r", engine.execute(SWAPPER.format(victim=str(victim)), cwd=str(project))))
        swapper.start()
        try:
            deadline = time.monotonic() + 45
            while time.monotonic() < deadline and not landed() and raced < 3:
                try:
                    engine.execute(LAND, cwd=str(project / "sub"))
                except (SandboxError, InvalidArgumentError) as exc:
                    raced += "changed since it was checked" in str(exc) or (
                        "symbolic link" in str(exc))
        finally:
            (project / "stop").touch()
            swapper.join(60)
    assert "SWAPS" in getattr(result.get("r"), "output", ""), result
    if level == "none":
        assert landed(), "the negative control never landed in the denied folder"
        return
    assert not landed(), landed()
    assert raced >= 3, raced
