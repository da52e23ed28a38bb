"""The terminal and process tools through the real dispatcher and real bash."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from execengine.approval.approver import Answer, ApprovalRequest, Decision
from execengine.config import Config
from execengine.context import CallContext
from execengine.registry import ToolRegistry
from tests.terminal.conftest import procs_with


@pytest.fixture
def reg(tmp_path: Path) -> Iterator[ToolRegistry]:
    cfg = Config().with_overrides({"terminal.cwd": str(tmp_path), "terminal.kill_grace": 0.2,
                                   "terminal.max_output_chars": 500})
    with ToolRegistry.with_builtins(cfg, plugins=False) as r:
        yield r


def call(reg: ToolRegistry, name: str, task: str = "t1", origin: str = "agent", **args):
    extra = args.pop("_extras", {})
    return json.loads(reg.dispatch(name, args, CallContext(origin=origin, **extra),
                                   task_id=task))


def test_registered_and_available(reg) -> None:
    assert {"terminal", "process"} <= set(reg.available_tools(["terminal"]))


def test_foreground_shape_and_sticky_cd_per_task(reg, tmp_path) -> None:
    (tmp_path / "sub").mkdir()
    r = call(reg, "terminal", command="cd sub && echo hi")
    assert r["output"] == "hi\n" and r["exit_code"] == 0 and "duration_seconds" in r
    assert call(reg, "terminal", command="pwd")["output"] == f"{tmp_path / 'sub'}\n"
    assert call(reg, "terminal", task="t2", command="pwd")["output"] == f"{tmp_path}\n"
    # the file tools see the same directory
    assert reg.services.workdirs.get("t1") == str(tmp_path / "sub")
    # workdir runs one command elsewhere without moving the task
    assert call(reg, "terminal", command="pwd", workdir="/")["output"] == "/\n"
    assert call(reg, "terminal", command="pwd")["output"] == f"{tmp_path / 'sub'}\n"


def test_timeout_and_cap(reg) -> None:
    r = call(reg, "terminal", command="echo start; sleep 20", timeout=1)
    assert r["exit_code"] == 124 and r["timed_out"] and "timed out after 1s" in r["error"]
    r = call(reg, "terminal", command="seq 1 100000")
    assert r["truncated"] and r["output"].endswith("100000\n") and len(r["output"]) < 700


def test_bad_input(reg) -> None:
    assert "non-empty" in call(reg, "terminal", command="  ")["error"]
    assert "timeout" in call(reg, "terminal", command="true", timeout="soon")["error"]
    for huge in (1e308, float("inf")):  # not a CPU-time rlimit overflow later
        assert "at most 2.592e+06" in call(reg, "terminal", command="true",
                                           timeout=huge)["error"]
    assert "not a directory" in call(reg, "terminal", command="true", workdir="nope")["error"]
    assert "unknown action" in call(reg, "process", action="explode")["error"]
    assert "needs session_id" in call(reg, "process", action="poll")["error"]
    assert "known: none" in call(reg, "process", action="kill", session_id="proc_9")["error"]


def test_execute_code_origin_is_foreground_only_and_goes_through_approval(reg) -> None:
    r = call(reg, "terminal", origin="execute_code", command="sleep 1", background=True)
    assert "not available from execute_code" in r["error"]
    r = call(reg, "terminal", origin="execute_code", command="tty", pty=True)
    assert "not available from execute_code" in r["error"]
    ok = call(reg, "terminal", origin="execute_code", command="echo fine")
    assert ok["output"] == "fine\n"
    marker = f"/tmp/{uuid.uuid4().hex}"
    r = call(reg, "terminal", origin="execute_code", command=f"mkdir {marker} && rm -rf {marker}")
    assert r["status"] == "denied" and "approval" in r["error"]
    assert not Path(marker).exists()


def test_host_approver_is_used(reg, tmp_path) -> None:
    seen: list[ApprovalRequest] = []

    class Host:
        def decide(self, request: ApprovalRequest) -> Answer:
            seen.append(request)
            return Answer(Decision.ONCE)

    target = tmp_path / "victim"
    (target / "deep").mkdir(parents=True)
    r = call(reg, "terminal", command=f"rm -rf {target}", _extras={"approver": Host()})
    assert r["exit_code"] == 0 and not target.exists()
    assert seen[0].descriptions == ("recursive delete",) and seen[0].session == "t1"
    blocked = call(reg, "terminal", command="rm -rf /", _extras={"approver": Host()})
    assert blocked["status"] == "blocked" and len(seen) == 1


def test_background_lifecycle(reg) -> None:
    started = call(reg, "terminal", command="echo one; sleep 0.2; echo two; exit 3",
                   background=True)
    sid = started["session_id"]
    assert started["status"] == "running"
    waited = call(reg, "process", action="wait", session_id=sid, timeout=10)
    assert waited["status"] == "exited" and waited["exit_code"] == 3 and not waited["timed_out"]
    assert call(reg, "process", action="log", session_id=sid)["output"] == "one\ntwo\n"
    assert call(reg, "process", action="log", session_id=sid)["output"] == ""
    assert call(reg, "process", action="poll", session_id=sid)["output_tail"] == "one\ntwo\n"
    assert [p["session_id"] for p in call(reg, "process", action="list")["processes"]] == [sid]
    assert call(reg, "process", task="t2", action="list")["processes"] == []
    assert "no background process" in call(reg, "process", task="t2", action="log",
                                           session_id=sid)["error"]


def test_background_pty_and_kill(reg) -> None:
    started = call(reg, "terminal", command="test -t 1 && echo tty; sleep 30", background=True,
                   pty=True)
    sid = started["session_id"]
    deadline = time.monotonic() + 5
    while "tty" not in call(reg, "process", action="poll", session_id=sid)["output_tail"]:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    waited = call(reg, "process", action="wait", session_id=sid, timeout=0.1)
    assert waited["timed_out"] and waited["status"] == "running"
    killed = call(reg, "process", action="kill", session_id=sid)
    assert killed["status"] == "exited"


def test_registry_close_kills_background_processes(tmp_path) -> None:
    token = uuid.uuid4().hex
    cfg = Config().with_overrides({"terminal.cwd": str(tmp_path), "terminal.kill_grace": 0.2})
    reg = ToolRegistry.with_builtins(cfg, plugins=False)
    for i in range(2):
        call(reg, "terminal", command=f"T={token}_{i} sleep 300", background=True)
    deadline = time.monotonic() + 5
    while len(procs_with(token)) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    reg.close()
    assert procs_with(token) == []
