"""SysV IPC objects a sandbox left behind, found and removed.

A SysV shared-memory segment, message queue or semaphore set outlives the process that
made it: at ``restricted`` one execution's segment stayed in the host's IPC namespace after
it ended, for a later execution that got the same slot uid to read (and 100 MB segments
stayed charged to the host). Executions at ``restricted`` therefore get an IPC namespace of
their own when the host may make one (root with namespaces: see
:mod:`execengine.isolation.entry`), which the kernel empties when its last process ends. Where
it cannot, the launcher calls :func:`remove_owned` when an execution's uid slot is given back,
before the uid is handed out again: every object that uid owns or created goes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from collections.abc import Iterator
from dataclasses import dataclass

log = logging.getLogger(__name__)

IPC_RMID = 0
#: /proc/sysvipc file -> the id column's name
KINDS = {"shm": "shmid", "msg": "msqid", "sem": "semid"}


@dataclass(frozen=True)
class IpcObject:
    kind: str  # "shm", "msg" or "sem"
    key: int
    id: int
    uid: int
    cuid: int


def objects(proc: str = "/proc/sysvipc") -> Iterator[IpcObject]:
    """Every SysV IPC object of this IPC namespace (as ``/proc/sysvipc`` lists them)."""
    for kind, id_column in KINDS.items():
        try:
            with open(f"{proc}/{kind}") as fh:
                header = fh.readline().split()
                rows = fh.read().splitlines()
        except OSError:
            continue
        where = {name: i for i, name in enumerate(header)}
        for row in rows:
            cells = row.split()
            try:
                yield IpcObject(kind, int(cells[where["key"]]), int(cells[where[id_column]]),
                                int(cells[where["uid"]]), int(cells[where["cuid"]]))
            except (KeyError, IndexError, ValueError):
                continue


def remove(obj: IpcObject) -> bool:
    """``IPC_RMID`` it (a segment still attached goes when its last user detaches)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if obj.kind == "shm":
        done = libc.shmctl(obj.id, IPC_RMID, None)
    elif obj.kind == "msg":
        done = libc.msgctl(obj.id, IPC_RMID, None)
    else:
        done = libc.semctl(obj.id, 0, IPC_RMID)
    return bool(done == 0)


def remove_owned(uid: int) -> int:
    """Remove every object ``uid`` owns or created; how many went."""
    gone = 0
    for obj in objects():
        if uid in (obj.uid, obj.cuid):
            if remove(obj):
                gone += 1
            else:
                log.warning("could not remove SysV %s %d of uid %d", obj.kind, obj.id, uid)
    return gone
