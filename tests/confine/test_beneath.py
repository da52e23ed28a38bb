"""open_beneath: openat2 where the kernel has it, and the O_NOFOLLOW walk, refuse every way
out of the directory; both are tested whatever this kernel offers."""

from __future__ import annotations

import os

import pytest

from execengine.confine import beneath
from execengine.confine.beneath import EscapeError, open_beneath, walk_open


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f.txt").write_text("inside")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("secret")
    (root / "abs_out").symlink_to(outside / "secret")
    (root / "rel_out").symlink_to("../outside/secret")
    (root / "dir_out").symlink_to(outside)
    (root / "rel_in").symlink_to("sub/f.txt")
    fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    yield fd
    os.close(fd)


def _read(fd: int) -> str:
    with os.fdopen(fd, "r") as fh:
        return fh.read()


OPENERS = [pytest.param(open_beneath, id="openat2-or-walk"), pytest.param(walk_open, id="walk")]


@pytest.mark.parametrize("opener", OPENERS)
def test_a_plain_path_below_opens(tree, opener):
    assert _read(opener(tree, "sub/f.txt", os.O_RDONLY)) == "inside"


@pytest.mark.parametrize("opener", OPENERS)
@pytest.mark.parametrize("rel", ["abs_out", "rel_out", "dir_out/secret", "../outside/secret",
                                 "sub/../../outside/secret"])
def test_every_way_out_is_refused(tree, opener, rel):
    with pytest.raises(EscapeError):
        opener(tree, rel, os.O_RDONLY)


@pytest.mark.parametrize("opener", OPENERS)
def test_absolute_paths_are_refused(tree, opener):
    with pytest.raises(EscapeError):
        opener(tree, "/etc/passwd", os.O_RDONLY)


def test_magic_links_are_refused(tree, tmp_path):
    os.symlink("/proc/self/root/etc/passwd", tmp_path / "root" / "magic")
    with pytest.raises(EscapeError):
        open_beneath(tree, "magic", os.O_RDONLY)


def test_openat2_follows_a_link_that_stays_inside(tree):
    if not beneath.have_openat2():
        pytest.skip("this kernel has no openat2")
    assert _read(open_beneath(tree, "rel_in", os.O_RDONLY)) == "inside"


def test_the_walk_follows_no_link_at_all(tree):
    with pytest.raises(EscapeError):
        walk_open(tree, "rel_in", os.O_RDONLY)


def test_missing_paths_raise_file_not_found(tree):
    with pytest.raises(FileNotFoundError):
        open_beneath(tree, "sub/nope", os.O_RDONLY)


def test_real_path_of_names_where_an_fd_landed(tree, tmp_path):
    fd = open_beneath(tree, "sub/f.txt", os.O_RDONLY)
    try:
        assert beneath.real_path_of(fd) == str(tmp_path / "root" / "sub" / "f.txt")
    finally:
        os.close(fd)
