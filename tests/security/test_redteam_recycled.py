"""An entry's namespaces and root serve more than one execution (issue 42): nothing of one
may reach the next.

At ``isolated`` (with cgroups) the namespaces' init of an entry, once an execution is over
and reported, resets its root and serves another (``entry._serve_again``): the
execution's binds detached, what they made in the root removed, fresh ``/tmp``,
``/dev/shm`` and IPC namespace, the pid counter back to 1, new Landlock rules. Execution
A plants what a tenant could leave for the next one: files in ``/tmp`` and ``/dev/shm``,
a SysV segment and message queue under a key, a daemon (``setsid``, double fork, an
environment without the run token), and its
working directory (a mount point in the root). Then executions of another tenant, B, run
until one runs in A's init (the reuse itself is checked: without it the test proves
nothing); B must find none of it, be pid 2 as a fresh entry's interpreter is, and see the
same mounts as in a fresh entry. Level ``none`` is the negative control: there B
finds A's files, objects and daemon.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest

from execengine.launch.local import LocalLauncher
from execengine.launch.sandboxed import IsolatedLauncher
from tests.isolation._prestart import teach
from tests.isolation.test_prestart import run, spec

from .conftest import level_params

LEVELS = [p for p in level_params() if p.values[0] in ("none", "isolated")]

PLANT = r"""
import ctypes, json, os, sys
key, secret = int(sys.argv[1]), sys.argv[2].encode()
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
for folder in ("/tmp", "/dev/shm"):
    with open(os.path.join(folder, "planted-" + sys.argv[2]), "wb") as fh:
        fh.write(secret)
os.makedirs("/tmp/planted-dir-" + sys.argv[2])
shmid = libc.shmget(key, 4096, 0o1000 | 0o666)
ctypes.memmove(libc.shmat(shmid, None, 0), secret, len(secret))
msqid = libc.msgget(key, 0o1000 | 0o666)
buf = ctypes.create_string_buffer(8 + len(secret))
ctypes.c_long.from_buffer(buf).value = 1
ctypes.memmove(ctypes.addressof(buf) + 8, secret, len(secret))
libc.msgsnd(msqid, buf, len(secret), 0)
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.close(r)
        os.write(w, str(os.getpid()).encode())
        os.close(w)
        for fd in (0, 1, 2):
            os.close(fd)
        # out of the tree, and no run token in its environment: at level none it escapes
        # the launcher's sweep too
        os.execve("/bin/sleep", ["sleep", "300"], {})
    os._exit(0)
os.close(w)
daemon = int(os.read(r, 32))
print(json.dumps({"pid": os.getpid(), "shmid": shmid, "msqid": msqid, "daemon": daemon,
                  "cwd": os.getcwd()}))
"""

PROBE = r"""
import ctypes, json, os, sys
key, secret, a = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
def segment(shmid):
    addr = libc.shmat(shmid, None, 0o10000)
    if addr in (None, 2**64 - 1):
        return None
    return ctypes.string_at(addr, len(secret)).decode("latin-1")
by_key = libc.shmget(key, 0, 0)
msqid = libc.msgget(key, 0)
buf = ctypes.create_string_buffer(8 + 256)
got = libc.msgrcv(msqid if msqid >= 0 else a["msqid"], buf, 256, 0, 0o4000)
files = [f for d in ("/tmp", "/dev/shm") for f in os.listdir(d) if secret in f]
def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
mounts = sorted(line.split()[4] for line in open("/proc/self/mountinfo"))
print(json.dumps({
    "files": files, "shm_by_key": segment(by_key) if by_key >= 0 else None,
    "shm_by_id": segment(a["shmid"]), "msg": buf.raw[8:8 + got].decode() if got > 0 else None,
    "daemon": alive(a["daemon"]), "pid": os.getpid(),
    "a_cwd": os.path.lexists(a["cwd"]),
    "mounts": [m for m in mounts if a["cwd"] not in m]}))
"""


def _launcher(level: str) -> object:
    return LocalLauncher() if level == "none" else IsolatedLauncher()


@pytest.mark.parametrize("level", LEVELS)
def test_nothing_of_an_execution_reaches_the_next_one_in_the_same_entry(tmp_path, level):
    key = secrets.randbelow(1 << 30) + 1
    secret = secrets.token_hex(8)
    # A works outside /tmp (its mount point is made in the root's own file system, not in
    # the /tmp that is replaced), B in it
    a_dir = Path(tempfile.mkdtemp(prefix="execengine-test-tenant-a-", dir="/var/tmp"))
    b_dir = tmp_path / "tenant-b"
    b_dir.mkdir()
    launcher = _launcher(level)
    planted: dict = {}
    try:
        if level != "none":
            teach(launcher, spec(PLANT, a_dir))
        rc, out, err, entry = run(launcher, spec(PLANT, a_dir, str(key), secret))
        assert rc == 0, err
        planted = json.loads(out)
        seen = None
        for _ in range(20):  # until one runs in A's entry (its init)
            rc, out, err, pid = run(launcher, spec(PROBE, b_dir, str(key), secret,
                                                   json.dumps(planted)))
            assert rc == 0, err
            if level == "none" or pid == entry:
                seen = json.loads(out)
                break
        assert seen is not None, "no execution ran in the entry A ran in: nothing was reused"
        if level == "none":  # the negative control: the probe sees what A left
            assert seen["files"] and seen["shm_by_key"] == secret and seen["msg"] == secret
            assert seen["daemon"] and seen["a_cwd"]
            return
        assert seen["files"] == [], seen
        assert (seen["shm_by_key"], seen["shm_by_id"], seen["msg"]) == (None, None, None)
        assert not seen["daemon"] and not seen["a_cwd"]
        assert seen["pid"] == planted["pid"] == 2
        # the mounts B saw are a fresh entry's (the root itself it may not list)
        with IsolatedLauncher(warm=0) as fresh:
            rc, out, err, _ = run(fresh, spec(PROBE, b_dir, str(key), secret,
                                              json.dumps(planted)))
            assert rc == 0, err
        first = json.loads(out)
        assert seen["mounts"] == first["mounts"]
    finally:
        launcher.close()  # type: ignore[attr-defined]
        shutil.rmtree(a_dir)
        if level == "none" and planted:  # what the negative control left on the host
            _remove_planted(key, secret, planted)


def _remove_planted(key: int, secret: str, planted: dict) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for get, ctl in ((libc.shmget, libc.shmctl), (libc.msgget, libc.msgctl)):
        ident = get(key, 0, 0) if get is libc.shmget else get(key, 0)
        if ident >= 0:
            ctl(ident, 0, None)  # IPC_RMID
    for folder in ("/tmp", "/dev/shm"):
        path = os.path.join(folder, "planted-" + secret)
        if os.path.exists(path):
            os.unlink(path)
    if os.path.isdir("/tmp/planted-dir-" + secret):
        os.rmdir("/tmp/planted-dir-" + secret)
    with contextlib.suppress(OSError):
        os.kill(planted["daemon"], signal.SIGKILL)
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{planted['daemon']}") and time.monotonic() < deadline:
        time.sleep(0.01)


def test_each_execution_in_a_recycled_entry_gets_its_own_tmp_size(tmp_path):
    """The fresh ``/tmp`` and ``/dev/shm`` of a reset are sized for the next execution,
    whatever the one before asked for (its limit holds in the entry that served another)."""
    from dataclasses import replace

    from execengine.launch.base import LaunchLimits

    code = ("import os\nfor d in ('/tmp', '/dev/shm'):\n    s = os.statvfs(d)\n"
            "    print(s.f_blocks * s.f_frsize >> 20)")
    with IsolatedLauncher() as launcher:
        teach(launcher, spec(code, tmp_path))
        seen = []
        for size in (16, 48, 16, 48, 16, 48, 16, 48):
            s = replace(spec(code, tmp_path), limits=LaunchLimits(tmp_mb=size))
            rc, out, err, entry = run(launcher, s)
            assert rc == 0, err
            assert out.split() == [str(size), str(size)], (size, out)
            seen.append(entry)
    assert len(set(seen)) < len(seen), "no entry served twice: the reset was not tested"
