"""Session cells and one-shot scripts on the ssh backend, against a real sshd on loopback:
the kernel runs on the remote (its streams relayed over one channel), keeps its state
between cells, and nothing a cell or a script leaves running outlives it."""

from __future__ import annotations

import json
import time

import pytest

from execengine.config import Config
from execengine.context import CallContext
from execengine.engine import Engine
from execengine.remote.kernel import FRAME, Demux

from .conftest import Remote


@pytest.fixture(scope="module")
def engine(remote: Remote):
    config = Config().with_overrides(remote.overrides(**{
        "code_execution.timeout": 20.0, "code_execution.kill_grace": 1.0,
        "approvals.execute_code": "allow"}))
    with Engine(config) as eng:
        yield eng


def test_a_session_keeps_its_state_on_the_remote(engine: Engine, remote: Remote) -> None:
    first = engine.execute("import os\nx = 41\nprint(os.getpid())", session="s")
    assert first.status == "success", (first.error, first.stderr)
    again = engine.execute("import os\nprint(x + 1, os.getpid())", session="s")
    assert again.output.split() == ["42", first.output.strip()]  # the same kernel
    failed = engine.execute("print('before')\n1/0", session="s")
    assert failed.status == "error" and "ZeroDivisionError" in failed.error
    assert failed.output.startswith("before\n")
    assert engine.sessions.close_session("s")
    assert remote.wait_no_processes() == []


def test_the_execute_code_tool_runs_cells_on_the_remote(engine: Engine,
                                                        remote: Remote) -> None:
    """The model's path (the FileNotFoundError of a kernel's program read as a file)."""
    call = CallContext(task_id="ssh-tool")
    out = json.loads(engine.registry.dispatch("execute_code", {"code": "y = 7"}, call))
    assert out["status"] == "success", out
    out = json.loads(engine.registry.dispatch("execute_code", {"code": "print(y * 6)"}, call))
    assert (out["status"], out["output"]) == ("success", "42\n"), out
    assert engine.sessions.close_session("ssh-tool")  # the call's session is its task's
    assert remote.wait_no_processes() == []


@pytest.mark.parametrize("session", [None, "bg"])
def test_a_background_child_does_not_outlive_its_run(engine: Engine, remote: Remote,
                                                     session: str | None) -> None:
    started = time.monotonic()
    r = engine.execute('import subprocess\nsubprocess.Popen(["sleep", "300"])\nprint("ok")',
                       session=session)
    assert (r.status, r.output) == ("success", "ok\n"), (r.error, r.stderr)
    assert time.monotonic() - started < 10  # not the timeout: nothing waited for it
    if session is not None:
        assert engine.sessions.close_session(session)
    assert remote.wait_no_processes() == []


def test_the_channel_is_taken_apart_exactly() -> None:
    """Frames of the kernel's stderr and replies, split anywhere, and ssh's own words
    between them, come out in order on the right side."""
    import os

    err_r, err_w = os.pipe()
    rep_r, rep_w = os.pipe()
    demux = Demux(err_w, rep_w)
    stream = (b"ssh: warning\n" + FRAME + b"e%08x" % 5 + b"oops\n" + FRAME + b"r%08x" % 12
              + b'{"op":"x"}\n\n' + FRAME[:2] + b"\x00" + FRAME + b"e%08x" % 1 + b"!")
    for i in range(len(stream)):  # one byte at a time
        demux.feed(stream[i:i + 1])
    demux.end()
    os.close(err_w)
    os.close(rep_w)
    with os.fdopen(err_r, "rb") as e, os.fdopen(rep_r, "rb") as r:
        assert e.read() == b"ssh: warning\noops\n" + FRAME[:2] + b"\x00!"
        assert r.read() == b'{"op":"x"}\n\n'
