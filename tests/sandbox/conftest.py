"""Fixtures for the child-side runtime: a real pyzmq ROUTER playing the host, raw Unix-socket
servers, staging directories, and leak checks (fds, child processes)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # ``sandbox`` is a top-level folder, not an installed package
    sys.path.insert(0, str(REPO))

from _sandbox_peers import FakeHost  # noqa: E402


def _open_fds() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")}


@pytest.fixture(autouse=True)
def no_leaks() -> Iterator[None]:
    """Every test leaves no open descriptors and no child processes behind."""
    before = _open_fds()
    me = psutil.Process()
    # processes other test modules keep for the whole session (an engine's spawner) are
    # not this test's
    existing = {p.pid for p in me.children(recursive=True)}
    yield
    leftovers = [p for p in me.children(recursive=True)
                 if p.pid not in existing and p.status() != psutil.STATUS_ZOMBIE]
    for p in leftovers:
        p.kill()
    assert not leftovers, f"processes left behind: {leftovers}"
    leaked = set()
    for fd in _open_fds() - before:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile (the listing's own descriptor)
        leaked.add((fd, target))
    assert not leaked, f"descriptors left open: {sorted(leaked)}"


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A private directory with a short path (socket paths must fit ``sun_path``)."""
    path = Path(tempfile.mkdtemp(prefix="ee-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
    assert not path.exists()


@pytest.fixture
def host(short_dir: Path) -> Iterator[FakeHost]:
    with FakeHost(short_dir / "rpc.sock") as h:
        yield h
