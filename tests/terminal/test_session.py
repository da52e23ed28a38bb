"""The session layer over the fake backend (no processes) and the real one."""

from __future__ import annotations

import os

import pytest

from execengine.config import Config
from execengine.errors import TerminalError
from execengine.registry import ToolRegistry
from execengine.terminal.backend import CommandResult
from execengine.terminal.fake import FakeBackend
from execengine.terminal.session import TerminalService
from execengine.workdirs import WORKDIRS, TaskDirs


def test_cwd_update_and_env_with_fake(tmp_path) -> None:
    fake = FakeBackend(lambda cmd, cwd: CommandResult("", 0, 0.0, cwd=str(tmp_path)))
    reg = ToolRegistry(Config().with_overrides({"terminal.cwd": "/"}))
    with reg, TerminalService(reg, lambda r: fake) as svc:
        svc.run("a", "cd somewhere")
        assert reg.service(WORKDIRS, TaskDirs).get("a") == str(tmp_path)
        assert reg.service(WORKDIRS, TaskDirs).get("b") == "/"
        assert fake.calls == [("run", "cd somewhere")]
    assert fake.closed


def test_passthrough_reaches_env(monkeypatch) -> None:
    monkeypatch.setenv("MY_API_KEY", "s3cret")
    reg = ToolRegistry(Config().with_overrides({"terminal.env_passthrough": ["MY_API_KEY"]}))
    with reg, TerminalService(reg, lambda r: FakeBackend()) as svc:
        assert svc.env()["MY_API_KEY"] == "s3cret"
    reg2 = ToolRegistry()
    with reg2, TerminalService(reg2, lambda r: FakeBackend()) as svc:
        assert "MY_API_KEY" not in svc.env()


def test_workdir_errors(tmp_path) -> None:
    reg = ToolRegistry(Config().with_overrides({"terminal.cwd": str(tmp_path)}))
    with reg, TerminalService(reg, lambda r: FakeBackend()) as svc:
        with pytest.raises(TerminalError, match="not a directory"):
            svc.run("a", "true", workdir="missing")
        gone = tmp_path / "gone"
        gone.mkdir()
        reg.service(WORKDIRS, TaskDirs).set("a", str(gone))
        os.rmdir(gone)
        with pytest.raises(TerminalError, match="no longer exists"):
            svc.run("a", "true")
