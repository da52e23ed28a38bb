from __future__ import annotations

import time

import psutil
import pytest

from execengine.config import parse_config as parse
from execengine.engine import Engine
from execengine.launch.local import LocalLauncher
from execengine.mcp import attach
from execengine.registry import ToolRegistry


@pytest.fixture
def no_leaks():
    """Every server process started by the test is gone afterwards."""
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    yield
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = [p for p in me.children(recursive=True)
                if p.pid not in before and p.status() != psutil.STATUS_ZOMBIE]
        if not left:
            return
        time.sleep(0.05)
    raise AssertionError(f"processes left behind: {left}")


@pytest.fixture
def mcp_registry(tmp_path, no_leaks):
    """``make(servers_yaml, **attach_kwargs)`` -> (registry, manager); closed after."""
    made: list[ToolRegistry] = []
    engines: list[Engine] = []

    def make(servers: str, *, extra: str = "", environ=None, cache: bool = True,
             engine: bool = False):
        text = (f"code_execution: {{isolation: none, mode: strict}}\n"
                f"mcp: {{restart_backoff: 0.1}}\n{extra}mcp_servers:\n{servers}")
        config = parse(text, source=str(tmp_path / "config.yaml"))
        reg = ToolRegistry.with_builtins(config, plugins=False)
        made.append(reg)
        if engine:  # attached to the registry: it serves execute_code
            engines.append(Engine(registry=reg, launcher=LocalLauncher()))
        manager = attach(reg, environ=environ,
                         cache_dir=tmp_path / "cache" if cache else "")
        return reg, manager

    yield make
    for eng in engines:
        eng.close()
    for reg in made:
        reg.close()
