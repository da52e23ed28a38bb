"""Red team (issue 39, item 3): ``restricted`` tenants leaked to each other through SysV IPC.

A shared-memory segment or message queue one execution made outlived it, in the host's IPC
namespace: a later execution of another task (which may get the same slot uid) found it by
its key and read it, and segments of ended executions stayed charged to the host. Now each
``restricted`` execution has an IPC namespace of its own (root), emptied by the kernel when
its last process ends; where none can be made, the launcher removes what the slot uid owns
before the uid is reused (:mod:`execengine.isolation.ipc`).

Execution A (task ``tenant-a``) makes a segment and a queue under a random key, mode 0666,
and writes a secret into both. Execution B (task ``tenant-b``) looks the key up, attaches
A's segment by its id, and reads the queue. B must find nothing, and after the engine has
closed, no object with the key is left on the host (``/proc/sysvipc``, what ``ipcs``
reads). Level ``none`` is the negative control: there B reads both secrets, and A's objects
are still on the host (the test removes them).
"""

from __future__ import annotations

import json
import secrets

import pytest

from execengine.config import Config
from execengine.engine.core import Engine
from execengine.isolation import ipc

from .conftest import level_params

LEVELS = [p for p in level_params() if p.values[0] in ("none", "restricted")]

SCRIPT = r'''
import ctypes, ctypes.util, json
libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
KEY, SECRET, ROLE, A = {key}, {secret!r}.encode(), {role!r}, {a}
IPC_CREAT, IPC_NOWAIT = 0o1000, 0o4000
out = {{}}
if ROLE == "make":
    shmid = libc.shmget(KEY, 4096, IPC_CREAT | 0o666)
    addr = libc.shmat(shmid, None, 0)
    ctypes.memmove(addr, SECRET, len(SECRET))
    msqid = libc.msgget(KEY, IPC_CREAT | 0o666)
    buf = ctypes.create_string_buffer(8 + len(SECRET))
    ctypes.c_long.from_buffer(buf).value = 1
    ctypes.memmove(ctypes.addressof(buf) + 8, SECRET, len(SECRET))
    sent = libc.msgsnd(msqid, buf, len(SECRET), 0)
    out = {{"shmid": shmid, "msqid": msqid, "attached": addr not in (None, 2**64 - 1),
           "sent": sent}}
else:
    def read_segment(shmid):
        addr = libc.shmat(shmid, None, 0o10000)  # SHM_RDONLY
        if addr in (None, 2**64 - 1):
            return None
        return ctypes.string_at(addr, len(SECRET)).decode("latin-1")
    by_key = libc.shmget(KEY, 0, 0)
    out["shm_by_key"] = read_segment(by_key) if by_key >= 0 else None
    out["shm_by_id"] = read_segment(A["shmid"])
    msqid = libc.msgget(KEY, 0)
    if msqid < 0:
        msqid = A["msqid"]  # ids are global in a namespace: try A's
    buf = ctypes.create_string_buffer(8 + 256)
    got = libc.msgrcv(msqid, buf, 256, 0, IPC_NOWAIT)
    out["msg"] = buf.raw[8:8 + got].decode("latin-1") if got > 0 else None
    try:
        with open("/proc/sysvipc/shm") as fh:
            out["listed"] = any(int(r.split()[0]) == KEY for r in fh.read().splitlines()[1:])
    except OSError:
        out["listed"] = None
print(json.dumps(out))
'''


def _run(engine: Engine, tmp_path, task: str, **fmt: object) -> dict:
    work = tmp_path / task
    work.mkdir(exist_ok=True)
    result = engine.execute(SCRIPT.format(**fmt), cwd=str(work), task_id=task)
    assert result.status == "success", result.output
    return json.loads(result.output.strip().splitlines()[-1])


def _left(key: int) -> list[ipc.IpcObject]:
    return [o for o in ipc.objects() if o.key == key]


@pytest.mark.parametrize("level", LEVELS)
def test_a_tenants_ipc_objects_are_not_anothers(level, tmp_path):
    key = secrets.randbelow(2**30) + 1
    secret = "tenant-a-" + secrets.token_hex(4)
    config = Config().with_overrides({
        "code_execution.isolation": level, "code_execution.min_isolation": level,
        "code_execution.timeout": 60, "approvals.mode": "allow",
        "approvals.execute_code": "allow"})
    try:
        with Engine(config) as engine:
            made = _run(engine, tmp_path, "tenant-a", key=key, secret=secret, role="make",
                        a="None")
            # the probe really made them (else the rest would prove nothing)
            assert made["shmid"] >= 0 and made["msqid"] >= 0, made
            assert made["attached"] and made["sent"] == 0, made
            seen = _run(engine, tmp_path, "tenant-b", key=key, secret=secret, role="look",
                        a=repr(made))
        left = _left(key)
        if level == "none":  # the negative control: the probe sees the leak
            assert seen["shm_by_key"] == secret and seen["msg"] == secret, seen
            assert seen["listed"] and {o.kind for o in left} == {"shm", "msg"}, left
        else:
            assert seen["shm_by_key"] is None and seen["shm_by_id"] is None, seen
            assert seen["msg"] is None and not seen["listed"], seen
            assert left == [], left
    finally:
        for obj in _left(key):
            ipc.remove(obj)
