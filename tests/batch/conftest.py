from __future__ import annotations

import time

import psutil
import pytest

from execengine.config import Config


def batch_config(**over) -> Config:
    base = {"code_execution.isolation": "none", "code_execution.kill_grace": 0.5,
            "code_execution.hello_timeout": 10.0, "code_execution.timeout": 20.0,
            "code_execution.mode": "strict"}
    base.update(over)
    return Config().with_overrides(base, origin="test")


@pytest.fixture
def no_leftover_children():
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    yield
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        extra = [p for p in me.children(recursive=True)
                 if p.pid not in before and p.status() != psutil.STATUS_ZOMBIE]
        if not extra:
            return
        time.sleep(0.05)
    raise AssertionError(f"children left running: {extra}")
