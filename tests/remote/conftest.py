"""The ``remote`` fixture: a real sshd on loopback and a throwaway user (see :mod:`.sshd`);
under CI (which installs openssh-server) a missing sshd fails instead of skipping."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from .sshd import SSHD, Remote, available, loopback_remote

__all__ = ["Remote"]


@pytest.fixture(scope="module")
def remote() -> Iterator[Remote]:
    if not available():
        if os.environ.get("CI"):
            pytest.fail(f"the SSH tests need root and {SSHD} (.ci/run installs openssh-server)")
        pytest.skip("needs root and an sshd binary")
    with loopback_remote() as r:
        yield r
