"""Red team: a session cell on the SSH backend against the host's demultiplexer.

A remote kernel's stderr and its replies share the SSH channel's stderr, in frames the
remote helper writes (``sandbox/remote.py``) and the host takes apart
(:class:`execengine.remote.kernel.Demux`); the replies decide a cell's end and status. The
cell runs as the helper's uid, so it could open ``/proc/<helper>/fd/2`` and write 12 bytes
of its own there: a frame header announcing 2 GiB. The host then took every later byte of
the channel's stderr as that frame's payload: the cell's real end never arrived, the cell
was reported as timed out and its kernel killed, and the host kept buffering whatever the
channel carried meanwhile. Now the helper is not dumpable (its ``/proc/<pid>/fd`` is closed
to other processes of its uid), and the host takes no length above what the helper ever
writes for a frame.

Real sshd on loopback (``tests/remote/sshd.py``). Controls: the cell does reach the
descriptors of another process of its uid (its own child) through ``/proc`` (the route the
attack used); and a fake header of a length the helper could write does swallow what
follows it (the demultiplexer is really fooled by what reaches it).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest

from execengine.config import Config
from execengine.engine import Engine
from execengine.remote.kernel import FRAME, Demux
from tests.remote.sshd import SSHD, Remote, available, loopback_remote

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def remote() -> Iterator[Remote]:
    if not available():
        if os.environ.get("CI"):
            pytest.fail(f"the SSH tests need root and {SSHD}")
        pytest.skip("needs root and an sshd binary")
    with loopback_remote() as r:
        yield r


FAKE_HEADER = """
import json, os, subprocess
res = {}
helper = os.getppid()
try:
    fd = os.open("/proc/%d/fd/2" % helper, os.O_WRONLY)
    os.write(fd, b"\\x00EEr7fffffff")  # a reply frame of 2 GiB, never sent
    os.close(fd)
    res["helper"] = "written"
except OSError as exc:
    res["helper"] = type(exc).__name__
# the control: a process of our uid that is dumpable (our own child)
child = subprocess.Popen(["sleep", "30"], stderr=subprocess.PIPE)
try:
    os.close(os.open("/proc/%d/fd/2" % child.pid, os.O_WRONLY))
    res["own_child"] = "opened"
except OSError as exc:
    res["own_child"] = type(exc).__name__
child.kill()
child.wait()
print(json.dumps(res))
"""


def test_a_cell_cannot_fake_a_frame_on_the_channel(remote: Remote) -> None:
    config = Config().with_overrides(remote.overrides(**{
        "code_execution.timeout": 15.0, "code_execution.kill_grace": 1.0,
        "approvals.execute_code": "allow"}))
    with Engine(config) as engine:
        first = engine.execute("x = 41", session="s")
        assert first.status == "success", (first.error, first.stderr)
        started = time.monotonic()
        r = engine.execute(FAKE_HEADER, session="s")
        took = time.monotonic() - started
        assert r.status == "success", (r.status, r.error, r.output)
        found = json.loads(r.output.strip().splitlines()[-1])
        assert found["own_child"] == "opened", found  # the /proc route works here
        assert found["helper"] != "written", found
        assert took < 10, took  # its end came when it ended, not at the timeout
        after = engine.execute("print(x + 1)", session="s")
        assert (after.status, after.output) == ("success", "42\n"), (after.error, after.output)
        assert engine.sessions.close_session("s")
    assert remote.wait_no_processes() == []


def _demux() -> tuple[Demux, int, int]:
    err_r, err_w = os.pipe()
    reply_r, reply_w = os.pipe()
    for fd in (err_r, reply_r):
        os.set_blocking(fd, False)
    return Demux(err_w, reply_w), err_r, reply_r


def _drain(fd: int) -> bytes:
    try:
        return os.read(fd, 1 << 20)
    except BlockingIOError:
        return b""


def _frame(kind: bytes, data: bytes) -> bytes:
    return FRAME + kind + b"%08x" % len(data) + data


def test_the_host_never_waits_for_a_frame_larger_than_the_helper_writes() -> None:
    demux, err_r, reply_r = _demux()
    try:
        reply = b'{"op": "done"}\n'
        demux.feed(FRAME + b"r7fffffff" + _frame(b"r", reply))
        assert _drain(reply_r) == reply
        assert _drain(err_r) == FRAME + b"r7fffffff"  # shown as the stderr it is
        # the control: a fake header of a length the helper could write does swallow
        # what follows (so only the helper may write on the channel)
        demux.feed(FRAME + b"e%08x" % 40 + _frame(b"r", reply))
        assert _drain(reply_r) == b""
    finally:
        for fd in (err_r, reply_r, *demux.out.values()):
            os.close(fd)
