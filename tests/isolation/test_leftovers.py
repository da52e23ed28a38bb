"""Sweeps of what dead hosts left (grant ledgers, tagged cgroups and tmp folders), and
grants shared by several live engines."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from execengine import hostdirs
from execengine.isolation import acl, cgroups, leftovers
from execengine.launch.sandboxed import _Grants

GID = 1_870_000_123  # not the real sandbox gid: these tests never touch live grants

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="ACL grants need root")


def dead_tag() -> str:
    """The owner tag of a process that has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    tag = hostdirs.owner_tag(proc.pid)
    proc.wait()
    return tag


@root_only
def test_a_grant_is_revoked_only_when_the_last_engine_releases_it(tmp_path):
    shared = tmp_path / "interp"
    shared.mkdir(mode=0o700)
    ledgers = str(tmp_path / "ledgers")
    a = _Grants(GID, leftovers.GrantLedger(ledgers))
    b = _Grants(GID, leftovers.GrantLedger(ledgers))
    taken_a = a.add([(str(shared), False)])
    taken_b = b.add([(str(shared), False)])
    assert taken_a == [str(shared)] and acl.group_perm(str(shared), GID)
    a.release(taken_a)
    assert acl.group_perm(str(shared), GID), "revoked while another engine holds it"
    b.release(taken_b)
    assert acl.group_perm(str(shared), GID) is None
    assert os.listdir(ledgers) == []  # empty ledgers are removed


@root_only
def test_grants_of_a_dead_host_are_swept_unless_a_live_one_holds_them(tmp_path):
    ledgers = tmp_path / "ledgers"
    ledgers.mkdir()
    mine, theirs = tmp_path / "mine", tmp_path / "both"
    for d in (mine, theirs):
        d.mkdir(mode=0o700)
        acl.grant(str(d), GID, write=True)
    (ledgers / f"{dead_tag()}-abcd1234.json").write_text(json.dumps([str(mine), str(theirs)]))
    live = leftovers.GrantLedger(str(ledgers))
    live.record([str(theirs)])
    assert leftovers.sweep_grants(GID, str(ledgers)) == [str(mine)]
    assert acl.group_perm(str(mine), GID) is None
    assert acl.group_perm(str(theirs), GID)
    assert sorted(os.listdir(ledgers)) == [os.path.basename(live.path)]
    live.record([])
    acl.revoke(str(theirs), GID)


def test_tmp_folders_of_dead_hosts_are_swept(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / f"{leftovers.TMP_PREFIX}{dead_tag()}-xyz"
    dead.mkdir()
    (dead / "script-file").write_text("left behind")
    mine = leftovers.make_tmp()
    leftovers.sweep(None, None)
    assert not dead.exists() and os.path.isdir(mine)
    os.rmdir(mine)


def test_cgroups_of_dead_hosts_are_removed_and_live_ones_kept():
    try:
        layout = cgroups.discover()
        dead = cgroups.ExecCgroup.create(layout, f"{dead_tag()}-test", memory_mb=None,
                                         max_processes=None)
    except OSError as exc:
        pytest.skip(f"cannot create cgroups here: {exc}")
    live = cgroups.ExecCgroup.create(layout, leftovers.cgroup_name("test"), memory_mb=None,
                                     max_processes=None)
    try:
        removed = leftovers.sweep_cgroups(layout)
        assert sorted(removed) == sorted(dead.dirs)
        assert all(os.path.isdir(d) for d in live.dirs)
    finally:
        dead.close()
        live.close()
