"""Temporary directories named after the host process that owns them, and their sweep.

A host that is SIGKILLed cannot remove its staging, socket and runtime directories. So
every such directory is created as ``<prefix><pid>-<start>-<random>``, where ``<pid>`` and
``<start>`` (the process's start time in clock ticks since boot, read from
``/proc/<pid>/stat``) identify the owning host even after its pid is reused. On start an
engine calls :func:`sweep` and removes the directories whose owner is gone — only ours:
same uid, one of our prefixes, a real directory (not a symlink), owner dead. A live
engine's directories are never touched; names without an owner tag are left alone.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable

import psutil

log = logging.getLogger(__name__)

_TAG = re.compile(r"(\d+)-(\d+)-")

#: the directories an engine makes in the temp dir, by name prefix (followed by the owner
#: tag): staging, runtime and RPC socket directories (:mod:`execengine.engine.prepare`,
#: :mod:`execengine.rpc.channel`); an engine's start sweeps those of dead hosts, and so
#: does a spawner whose host died (:mod:`execengine.isolation._spawnserver`)
STAGING_PREFIX = "execengine-run-"
RUNTIME_PREFIX = "execengine-runtime-"
SOCKET_DIR_PREFIX = "execengine-rpc-"
ENGINE_PREFIXES = (STAGING_PREFIX, RUNTIME_PREFIX, SOCKET_DIR_PREFIX)


def start_time(pid: int) -> int | None:
    """When ``pid`` started: clock ticks since boot on Linux (exact and immune to clock
    changes), whole seconds since the epoch elsewhere; None when there is no such process."""
    if sys.platform.startswith("linux"):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            return None
        # the command name may contain spaces and parentheses: fields follow the last ')'
        fields = stat[stat.rfind(b")") + 2:].split()
        try:
            return int(fields[19])  # field 22 of proc(5), counted from 1 with pid and comm
        except (IndexError, ValueError):
            return None
    try:
        return int(psutil.Process(pid).create_time())
    except (psutil.Error, OSError):
        return None


#: this process's tag, with the pid it was made for (a forked child makes its own)
_own_tag: tuple[int, str] = (0, "")


def owner_tag(pid: int | None = None) -> str:
    """``"<pid>-<start>"`` of this (or another live) process."""
    global _own_tag
    if pid is None:
        me = os.getpid()
        if _own_tag[0] != me:
            _own_tag = (me, f"{me}-{start_time(me) or 0}")
        return _own_tag[1]
    return f"{pid}-{start_time(pid) or 0}"


def owner_alive(pid: int, start: int) -> bool:
    """Whether the process that created a tagged directory still runs (not a zombie)."""
    now = start_time(pid)
    if now is None:
        return False
    same = now == start if sys.platform.startswith("linux") else abs(now - start) <= 1
    if not same:
        return False  # the pid was reused
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def make_dir(prefix: str, base: str | None = None, *, mode: int = 0o700) -> str:
    """A new private directory ``<base>/<prefix><pid>-<start>-<random>``."""
    path = tempfile.mkdtemp(prefix=f"{prefix}{owner_tag()}-", dir=base)
    os.chmod(path, mode)
    return path


def parse_owner(name: str, prefix: str) -> tuple[int, int] | None:
    """The ``(pid, start)`` a directory name carries, or None."""
    if not name.startswith(prefix):
        return None
    m = _TAG.match(name, len(prefix))
    return (int(m.group(1)), int(m.group(2))) if m else None


def sweep(prefixes: Iterable[str], roots: Iterable[str | None] = (None,)) -> list[str]:
    """Remove the directories under ``roots`` (None: the temp dir) that carry one of
    ``prefixes`` and an owner tag of a dead process; return what was removed. Never
    raises: a directory that cannot be inspected or removed is skipped."""
    prefixes = tuple(prefixes)
    uid = os.getuid()
    removed: list[str] = []
    alive: dict[tuple[int, int], bool] = {}
    for root in dict.fromkeys(r or tempfile.gettempdir() for r in roots):
        try:
            entries = list(os.scandir(root))
        except OSError:
            continue
        for entry in entries:
            owner = next((o for p in prefixes if (o := parse_owner(entry.name, p))), None)
            if owner is None:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
                if not entry.is_dir(follow_symlinks=False) or st.st_uid != uid:
                    continue
            except OSError:
                continue
            if owner not in alive:
                alive[owner] = owner_alive(*owner)
            if alive[owner]:
                continue
            shutil.rmtree(entry.path, ignore_errors=True)
            if not os.path.lexists(entry.path):
                removed.append(entry.path)
    if removed:
        log.info("removed %d directories left by dead execengine hosts", len(removed))
    return removed
