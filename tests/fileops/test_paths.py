"""PathGuard.from_config reuses a guard for GUARD_TTL seconds, then resolves anew."""

from __future__ import annotations

import os

import pytest

from execengine.config import Config
from execengine.fileops import paths
from execengine.fileops.paths import PathGuard


def _config(denied: list[str]) -> Config:
    return Config().with_overrides({"files.denied_paths": denied})


def test_a_guard_is_reused_within_its_ttl(tmp_path):
    config = _config([str(tmp_path / "secret")])
    first = PathGuard.from_config(config)
    assert PathGuard.from_config(config) is first
    assert PathGuard.from_config(_config([str(tmp_path / "other")])) is not first


def test_after_the_ttl_a_guard_resolves_the_denied_paths_anew(tmp_path, monkeypatch):
    # a denied file that appears later is recognised by inode (a hard link to it is
    # refused) once the guard is rebuilt
    secret = tmp_path / "secret"
    config = _config([str(secret)])
    before = PathGuard.from_config(config)
    secret.write_text("key")
    os.link(secret, tmp_path / "link")
    assert before.reason(tmp_path / "link") is None  # built before the file existed
    monkeypatch.setattr(paths, "GUARD_TTL", 0.0)
    after = PathGuard.from_config(config)
    assert after is not before
    assert after.reason(tmp_path / "link") == str(secret)


def test_the_cache_is_bounded(tmp_path):
    for i in range(3 * paths._MAX_GUARDS):
        PathGuard.from_config(_config([str(tmp_path / f"d{i}")]))
    assert len(paths._GUARDS) <= paths._MAX_GUARDS


@pytest.mark.parametrize("ttl", [0.0, paths.GUARD_TTL])
def test_a_reused_guard_still_refuses_what_it_resolved(tmp_path, monkeypatch, ttl):
    monkeypatch.setattr(paths, "GUARD_TTL", ttl)
    (tmp_path / "secret").mkdir()
    (tmp_path / "innocent").symlink_to(tmp_path / "secret")
    config = _config([str(tmp_path / "secret")])
    for _ in range(2):
        guard = PathGuard.from_config(config)
        assert guard.reason(tmp_path / "innocent" / "id_rsa") == str(tmp_path / "secret")
        assert guard.reason(tmp_path / "public") is None
