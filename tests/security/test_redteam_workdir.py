"""Red team: a hostile working directory (a batch task's ``cwd``, an API caller's).

A sandbox is granted write access to its working directory itself (an ACL for the
execution; at ``isolated`` with ``workdir_as_owner`` an id-mapped bind). Given ``/`` or ``/etc``,
that is renaming ``/usr`` or creating ``/etc/ld.so.preload``: a system folder, or one in a
denied path, is refused before anything starts (execengine/host/confinement.py).

The negative control: an ordinary root-owned 0755 folder as the working directory *is*
writable by the sandbox (the grant the refusal keeps away from system folders).

The owner's private files inside the working directory (a 0600 file in a 0700 folder:
``~/.ssh`` when the working directory is a home) stay private at every sandboxed level. An
id-mapped working directory (``isolated`` with ``workdir_as_owner``, off by default) shows
them as the sandbox's own: that opt-in is the control here, and it does read them.
"""

from __future__ import annotations

import json
import os

import pytest

from execengine.batch import LocalExecutor
from execengine.batch.task import Task
from execengine.config import Config
from execengine.engine.core import Engine
from execengine.errors import SandboxError

from .conftest import level_params

SANDBOXED = [p for p in level_params() if p.values[0] != "none"]
LEVEL = level_params()


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


@pytest.mark.parametrize("cwd", ["/", "/etc", "/usr/lib", "/var", "~/.ssh"])
@pytest.mark.parametrize("level", SANDBOXED)
def test_a_system_folder_is_never_a_sandboxs_working_directory(level, cwd, tmp_path):
    path = os.path.expanduser(cwd)
    with Engine(_config(level)) as engine:
        with pytest.raises(SandboxError, match="working directory"):
            engine.execute(PROBE, cwd=path)
        with pytest.raises(SandboxError, match="working directory"):
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
def test_roots_private_files_in_the_working_directory_stay_private(level, tmp_path):
    work = tmp_path / "home"
    work.mkdir()
    private = work / ".ssh"
    private.mkdir(mode=0o700)
    (private / "id_rsa").write_text("PRIVATE KEY\n")
    (private / "id_rsa").chmod(0o600)
    with Engine(_config(level)) as engine:
        r = engine.execute(READ_PRIVATE, cwd=str(work))
    assert r.status == "success", (r.error, r.stderr)
    if level == "none":  # negative control: the same uid as the host reads it
        assert "READ: PRIVATE KEY" in r.output, r.output
        return
    assert "PRIVATE KEY" not in r.output and "REFUSED" in r.output, r.output


@pytest.mark.parametrize("level", [p for p in SANDBOXED if p.values[0] == "isolated"])
def test_an_owner_workdir_reads_the_owners_private_files_as_documented(level, tmp_path):
    """``workdir_as_owner``: the script is the owner inside the working directory, private
    files included (the documented price of editing the owner's files in place)."""
    work = tmp_path / "home"
    (work / ".ssh").mkdir(parents=True, mode=0o700)
    (work / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    (work / ".ssh" / "id_rsa").chmod(0o600)
    with Engine(_config(level, **{"code_execution.workdir_as_owner": True})) as engine:
        r = engine.execute(READ_PRIVATE, cwd=str(work))
    assert r.status == "success", (r.error, r.stderr)
    assert "READ: PRIVATE KEY" in r.output, r.output
