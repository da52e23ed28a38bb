"""What the host resolves per execution is reused for workdirs.TTL seconds, then resolved
anew: the file tools' guard and the launcher's path lists."""

from __future__ import annotations

import os

import pytest

from execengine import workdirs
from execengine.config import Config
from execengine.fileops.paths import PathGuard

#: the TTL these tests run with: "within the TTL" must not depend on how fast the
#: machine is (a stall of a second between two calls would end it); the tests that
#: need it over set it to 0
LONG = 3600.0


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    workdirs.forget()
    monkeypatch.setattr(workdirs, "TTL", LONG)
    yield
    workdirs.forget()


def _config(denied: list[str]) -> Config:
    return Config().with_overrides({"files.denied_paths": denied})


def test_a_guard_is_reused_within_the_ttl(tmp_path):
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
    monkeypatch.setattr(workdirs, "TTL", 0.0)
    after = PathGuard.from_config(config)
    assert after is not before
    assert after.reason(tmp_path / "link") == str(secret)


@pytest.mark.parametrize("ttl", [0.0, LONG])
def test_a_reused_guard_still_refuses_what_it_resolved(tmp_path, monkeypatch, ttl):
    monkeypatch.setattr(workdirs, "TTL", ttl)
    (tmp_path / "secret").mkdir()
    (tmp_path / "innocent").symlink_to(tmp_path / "secret")
    config = _config([str(tmp_path / "secret")])
    for _ in range(2):
        guard = PathGuard.from_config(config)
        assert guard.reason(tmp_path / "innocent" / "id_rsa") == str(tmp_path / "secret")
        assert guard.reason(tmp_path / "public") is None


def test_the_cache_is_bounded(tmp_path):
    for i in range(3 * workdirs.MAX_KEYS):
        workdirs.real_paths((str(tmp_path / f"d{i}"),))
        PathGuard.from_config(_config([str(tmp_path / f"d{i}")]))
    assert len(workdirs._cache) <= workdirs.MAX_KEYS


def test_paths_are_resolved_through_links_and_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    assert workdirs.real_paths(("~/alias/key", str(tmp_path / "missing"))) == (
        str(tmp_path / "real" / "key"), str(tmp_path / "missing"))


def test_a_changed_link_is_seen_once_the_ttl_is_over(tmp_path, monkeypatch):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "a")
    paths = (str(link),)
    assert workdirs.real_paths(paths) == (str(tmp_path / "a"),)
    link.unlink()
    link.symlink_to(tmp_path / "b")
    assert workdirs.real_paths(paths) == (str(tmp_path / "a"),)  # within the TTL
    monkeypatch.setattr(workdirs, "TTL", 0.0)
    assert workdirs.real_paths(paths) == (str(tmp_path / "b"),)


def test_a_failing_build_keeps_nothing():
    def boom() -> None:
        raise OSError("no")

    with pytest.raises(OSError):
        workdirs.recent("k", boom)
    assert workdirs.recent("k", lambda: 1) == 1


def test_home_and_the_working_directory_are_part_of_the_key(tmp_path, monkeypatch):
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "one"))
    monkeypatch.chdir(tmp_path / "one")
    assert workdirs.real_paths(("~/.ssh", "rel")) == (
        str(tmp_path / "one" / ".ssh"), str(tmp_path / "one" / "rel"))
    monkeypatch.setenv("HOME", str(tmp_path / "two"))
    monkeypatch.chdir(tmp_path / "two")
    assert workdirs.real_paths(("~/.ssh", "rel")) == (
        str(tmp_path / "two" / ".ssh"), str(tmp_path / "two" / "rel"))
