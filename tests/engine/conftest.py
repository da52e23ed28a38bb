from __future__ import annotations

import os
import time

import psutil
import pytest
from _engine_helpers import Recorder, engine_config, make_registry

from execengine.engine import Engine
from execengine.launch.base import Launcher


@pytest.fixture
def leakcheck():
    """No child processes, staging or socket directories, or fds left behind."""
    me = psutil.Process()
    fds = me.num_fds()
    # processes other test modules keep for the session (an engine's spawner) are not ours
    existing = {p.pid for p in me.children(recursive=True)}

    def new_children() -> list[psutil.Process]:
        found = []
        for p in me.children(recursive=True):
            try:
                if p.pid not in existing and p.status() != "zombie":
                    found.append(p)
            except psutil.NoSuchProcess:
                continue
        return found

    recorders: list[Recorder] = []
    yield recorders
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and (new_children() or me.num_fds() > fds):
        time.sleep(0.02)
    assert new_children() == []
    left = [d for r in recorders for d in r.dirs if d and os.path.exists(d)]
    assert left == []
    assert me.num_fds() <= fds


@pytest.fixture
def calls():
    return []


@pytest.fixture
def make_engine(leakcheck, calls):
    made = []

    def make(launcher: Launcher | None = None, **over) -> Engine:
        cfg = engine_config(**over)
        reg = make_registry(cfg, calls)
        launcher = launcher or Recorder()
        if isinstance(launcher, Recorder):
            leakcheck.append(launcher)
        eng = Engine(config=cfg, registry=reg, launcher=launcher)
        made.append((eng, reg))
        return eng

    yield make
    for eng, reg in made:
        reg.release_sleepers.set()  # tool calls still "sleeping" return now
        eng.close()
        reg.close()


@pytest.fixture
def engine(make_engine):
    return make_engine()
