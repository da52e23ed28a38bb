"""What a killed host leaves behind at ``restricted``/``isolated``, and the sweep that
removes it when the next launcher starts.

A host that is SIGKILLed cannot tear down. Its spawner notices (EOF on its socket) and
kills and removes everything it started (see :mod:`._spawnserver`), but the spawner may die
with it. So every host-owned resource carries the owner tag of :mod:`execengine.hostdirs`
(``<pid>-<start>``), and :func:`sweep` removes those whose owner is gone:

* cgroups ``execengine-<pid>-<start>-...`` under our parent group, in every hierarchy:
  members are killed, directories removed;
* ACL grants to the sandbox group: each launcher keeps a ledger of the paths it granted in
  ``/run/execengine/grants/<pid>-<start>-<id>.json``; a dead owner's paths are revoked
  unless a live ledger still lists them (the same ledgers keep a live engine from revoking
  what another live engine still needs);
* private tmp folders ``execengine-tmp-<pid>-<start>-...`` (``restricted``).

What stays on purpose: ``--x`` (traverse-only) entries for the sandbox group on ancestors
of granted paths that others cannot traverse (for example ``/root`` when the interpreter
lives under it); they expose no names or contents. See :mod:`.acl`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable

from execengine import hostdirs
from execengine.isolation import acl, cgroups

log = logging.getLogger(__name__)

GRANTS_DIR = "/run/execengine/grants"
TMP_PREFIX = "execengine-tmp-"


class GrantLedger:
    """The paths one launcher has granted to the sandbox group, kept in a file."""

    def __init__(self, directory: str = GRANTS_DIR) -> None:
        self.directory = directory
        self.path = os.path.join(directory, f"{hostdirs.owner_tag()}-{uuid.uuid4().hex[:8]}"
                                 ".json")
        self._lock = threading.Lock()

    def record(self, paths: Iterable[str]) -> None:
        """Replace the recorded set (best effort: a ledger that cannot be written only
        weakens the sweep)."""
        paths = sorted(paths)
        with self._lock:
            try:
                if not paths:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.path)
                    return
                os.makedirs(self.directory, mode=0o700, exist_ok=True)
                tmp = self.path + ".tmp"
                with open(tmp, "w") as fh:
                    json.dump(paths, fh)
                os.replace(tmp, self.path)
            except OSError as exc:
                log.debug("cannot write the grant ledger %s: %s", self.path, exc)

    def held_elsewhere(self) -> set[str]:
        """Paths that other live launchers (of any engine on this host) hold."""
        held: set[str] = set()
        for path, alive in _ledgers(self.directory):
            if alive and path != self.path:
                held.update(_read(path))
        return held


def _ledgers(directory: str) -> list[tuple[str, bool]]:
    out: list[tuple[str, bool]] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return out
    for name in names:
        owner = hostdirs.parse_owner(name, "")
        if owner is None or not name.endswith(".json"):
            continue
        out.append((os.path.join(directory, name), hostdirs.owner_alive(*owner)))
    return out


def _read(path: str) -> list[str]:
    try:
        with open(path) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return []
    return [p for p in data if isinstance(p, str)] if isinstance(data, list) else []


def sweep_grants(gid: int, directory: str = GRANTS_DIR) -> list[str]:
    """Revoke what dead launchers granted (unless a live one holds it); the paths revoked."""
    ledgers = _ledgers(directory)
    held = {p for path, alive in ledgers if alive for p in _read(path)}
    revoked = []
    for path, alive in ledgers:
        if alive:
            continue
        for granted in _read(path):
            if granted not in held:
                with contextlib.suppress(OSError):
                    acl.revoke(granted, gid)
                    revoked.append(granted)
        with contextlib.suppress(OSError):
            os.unlink(path)
    return revoked


def cgroup_name(name: str) -> str:
    """An execution cgroup's name, tagged with this host (``<pid>-<start>-<name>``)."""
    return f"{hostdirs.owner_tag()}-{name}"


def sweep_cgroups(layout: cgroups.CgroupLayout) -> list[str]:
    """Kill the members of and remove the cgroups of dead hosts; the directories removed."""
    parents = [p for p in (layout.v2_parent, *(d for _, d in layout.v1_parents)) if p]
    dead = [os.path.join(parent, name)
            for parent in parents for name in _listdir(parent)
            if (owner := hostdirs.parse_owner(name, cgroups.PREFIX)) is not None
            and not hostdirs.owner_alive(*owner)]
    for d in dead:  # the v2 dir first: cgroup.kill reaches every member at once
        with contextlib.suppress(OSError), open(os.path.join(d, "cgroup.kill"), "w") as fh:
            fh.write("1")
    removed = []
    end = time.monotonic() + 5.0  # killed members may take a moment to exit on a busy host
    for d in dead:
        while True:
            try:
                os.rmdir(d)
                removed.append(d)
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > end:
                    log.warning("cannot remove the cgroup %s of a dead host", d)
                    break
                _kill_members(d)
                time.sleep(0.005)
    return removed


def _kill_members(d: str) -> None:
    with contextlib.suppress(OSError), open(os.path.join(d, "cgroup.procs")) as fh:
        for pid in fh.read().split():
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid), signal.SIGKILL)


def _listdir(d: str) -> list[str]:
    try:
        return os.listdir(d)
    except OSError:
        return []


def make_tmp() -> str:
    """A private tmp folder for one ``restricted`` execution, tagged with this host."""
    return hostdirs.make_dir(TMP_PREFIX)


def sweep(layout: cgroups.CgroupLayout | None, gid: int | None,
          tmp_root: str | None = None) -> None:
    """Everything above (``tmp_root``: where the tmp folders are, by default the temp
    dir); never raises (housekeeping must not stop a launcher, nor a spawner)."""
    try:
        if layout is not None:
            sweep_cgroups(layout)
        if gid is not None:
            sweep_grants(gid)
        hostdirs.sweep((TMP_PREFIX,), (tmp_root or tempfile.gettempdir(),))
    except Exception:
        log.warning("cleaning up after dead hosts failed", exc_info=True)
