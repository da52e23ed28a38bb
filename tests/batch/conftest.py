from __future__ import annotations

import time

import psutil
import pytest


@pytest.fixture
def no_leftover_children():
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    yield
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        extra = [p for p in me.children(recursive=True) if p.pid not in before and _running(p)]
        if not extra:
            return
        time.sleep(0.05)
    raise AssertionError(f"children left running: {extra}")


def _running(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
