from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from execengine.childenv import build_child_env
from execengine.terminal.local import LocalBackend


def procs_with(token: str) -> list[int]:
    """Live processes whose command line or environment mentions ``token``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read()
            if stat[stat.rindex(b")") + 2:][:1] == b"Z":
                continue
            blobs = []
            for name in ("cmdline", "environ"):
                with open(f"/proc/{entry.name}/{name}", "rb") as fh:
                    blobs.append(fh.read())
        except OSError:
            continue
        if any(token.encode() in b for b in blobs):
            found.append(int(entry.name))
    return found


@pytest.fixture
def env() -> dict[str, str]:
    return build_child_env(os.environ)


@pytest.fixture
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(kill_grace=0.3, buffer_chars=4096, max_background=4) as b:
        yield b


@pytest.fixture
def fd_count(backend, env) -> Iterator[None]:
    # the backend's one lasting descriptor, its guard's pipe, opens with its first command
    backend.run("true", cwd="/", env=env, timeout=10, max_output_chars=100)
    before = len(os.listdir("/proc/self/fd"))
    yield
    assert len(os.listdir("/proc/self/fd")) <= before
