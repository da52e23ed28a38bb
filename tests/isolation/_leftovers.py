"""What a dead host can leave, found by its pid: tagged folders, cgroups, live processes
(shared by the host-death tests of the isolation layers and of the MCP servers)."""

from __future__ import annotations

import os

import psutil

from execengine.hostdirs import parse_owner
from execengine.isolation import cgroups


def tagged(root: str, prefix: str, pid: int) -> list[str]:
    """The entries of ``root`` named ``<prefix><pid>-<start>-...`` for host ``pid``."""
    try:
        names = os.listdir(root)
    except OSError:
        return []
    return [os.path.join(root, n) for n in names
            if (o := parse_owner(n, prefix)) is not None and o[0] == pid]


def cgroup_dirs_of(pid: int) -> list[str]:
    """The execution cgroups of host ``pid``, in every hierarchy."""
    try:
        layout = cgroups.discover()
    except OSError:
        return []
    parents = [p for p in (layout.v2_parent, *(d for _, d in layout.v1_parents)) if p]
    return [d for parent in parents for d in tagged(parent, cgroups.PREFIX, pid)]


def alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``procs`` still running (zombies are not)."""
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            continue
    return out
