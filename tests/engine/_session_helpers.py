"""Helpers of the session tests: an engine at a chosen level with a controllable tool."""

from __future__ import annotations

import glob
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from _engine_helpers import make_registry

from execengine.config import Config
from execengine.engine import Engine
from execengine.hostdirs import owner_tag
from execengine.isolation.detect import detect
from execengine.policy import ToolPolicy
from execengine.proctree import RUN_TOKEN_VAR, carriers

LEVELS = ("none", "restricted", "isolated")


def level_params() -> list[object]:
    report = detect()
    return [pytest.param(lv, marks=pytest.mark.skipif(
        not report.levels.get(lv), reason=f"level {lv} unavailable: {report.reasons.get(lv)}"),
        id=lv) for lv in LEVELS]


class Gate:
    """A tool (``web_extract``) that blocks until the test opens the gate."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.open = threading.Event()

    def __call__(self, args: dict, ctx: object) -> dict:
        self.entered.set()
        self.open.wait(30)
        return {"results": []}


def wait_until(pred: Callable[[], object], seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return bool(pred())


def our_dirs() -> set[str]:
    """Staging, runtime and socket directories of this process that exist now."""
    found: set[str] = set()
    for root in {tempfile.gettempdir(), "/tmp"}:
        for prefix in ("execengine-run-", "execengine-rpc-", "execengine-runtime-"):
            found.update(glob.glob(os.path.join(root, prefix + owner_tag() + "-*")))
    return found


def run_tokens(engine: Engine) -> list[str]:
    """The run tokens of the engine's live kernels (every process of a kernel has it)."""
    with engine.sessions._lock:
        kernels = [s.kernel for s in engine.sessions._sessions.values()]
    return [k.process.child.run_token for k in kernels if k is not None]  # type: ignore


def leftover_processes(tokens: list[str]) -> list[int]:
    return [pid for t in tokens for pid in carriers(RUN_TOKEN_VAR, t)]


@contextmanager
def session_engine(level: str, calls: list | None = None, gate: Gate | None = None,
                   **over: object) -> Iterator[Engine]:
    """An engine at ``level``; after it closes, none of its kernels, channels or staging
    directories is left."""
    base: dict[str, object] = {
        "code_execution.kill_grace": 0.5, "code_execution.hello_timeout": 10.0,
        "code_execution.timeout": 20.0, "code_execution.mode": "strict",
        "code_execution.isolation": level,
        "approvals.execute_code": "allow"}  # the script gate is not what these tests test
    base.update({f"code_execution.{k}": v for k, v in over.items()})
    cfg = Config().with_overrides(base)
    reg = make_registry(cfg, calls)
    if gate is not None:
        reg.register("web_extract", "web", {"description": "Extract.", "parameters": {
            "type": "object", "properties": {"urls": {"type": "array"}}}}, gate,
            policy=ToolPolicy(script_callable=True))
    before = our_dirs()
    engine = Engine(config=cfg, registry=reg)
    tokens: list[str] = []
    try:
        yield engine
        tokens = [] if engine._closed else run_tokens(engine)
    finally:
        engine.close()
        reg.close()
    assert wait_until(lambda: not leftover_processes(tokens), 5.0), \
        leftover_processes(tokens)
    left = our_dirs() - before
    assert left == set(), left


def kernel_of(engine: Engine, name: str) -> Any:  # a peek at internals
    session = engine.sessions._sessions.get(name)
    return session.kernel if session is not None else None
