"""The session layer over the fake backend (no processes) and the real one."""

from __future__ import annotations

import os

import pytest

from execengine.config import Config
from execengine.errors import TerminalError
from execengine.terminal.backend import CommandResult
from execengine.terminal.fake import FakeBackend
from execengine.terminal.session import TerminalService
from execengine.workdirs import TaskDirs


def _service(config: Config, backend: FakeBackend, start: str = "/") -> TerminalService:
    return TerminalService(config, lambda: backend, TaskDirs(lambda: start),
                           lambda: tuple(config.terminal.env_passthrough))


def test_cwd_update_and_env_with_fake(tmp_path) -> None:
    fake = FakeBackend(lambda cmd, cwd: CommandResult("", 0, 0.0, cwd=str(tmp_path)))
    with _service(Config(), fake) as svc:
        svc.run("a", "cd somewhere")
        assert svc.dirs.get("a") == str(tmp_path)
        assert svc.dirs.get("b") == "/"
        assert fake.calls == [("run", "cd somewhere")]
    assert fake.closed


def test_passthrough_reaches_env(monkeypatch) -> None:
    monkeypatch.setenv("MY_API_KEY", "s3cret")
    config = Config().with_overrides({"terminal.env_passthrough": ["MY_API_KEY"]})
    with _service(config, FakeBackend()) as svc:
        assert svc.env()["MY_API_KEY"] == "s3cret"
    with _service(Config(), FakeBackend()) as svc:
        assert "MY_API_KEY" not in svc.env()


def test_workdir_errors(tmp_path) -> None:
    with _service(Config(), FakeBackend(), str(tmp_path)) as svc:
        with pytest.raises(TerminalError, match="not a directory"):
            svc.run("a", "true", workdir="missing")
        gone = tmp_path / "gone"
        gone.mkdir()
        svc.dirs.set("a", str(gone))
        os.rmdir(gone)
        with pytest.raises(TerminalError, match="no longer exists"):
            svc.run("a", "true")
