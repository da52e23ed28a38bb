"""OS isolation levels behind the launcher seam.

* :mod:`.detect` — cheap start-up probes of every layer, with a reason for each missing one
* :mod:`.landlock`, :mod:`.seccomp`, :mod:`.rlimits`, :mod:`.uids`, :mod:`.acl`,
  :mod:`.cgroups`, :mod:`.mounts` — one layer each
* :mod:`.entry` + :mod:`._spawnserver` / :mod:`.spawner` — the single-threaded fork server
  that enters sandboxes, and its host-side client
* :mod:`.launchers` — :class:`RestrictedLauncher`, :class:`IsolatedLauncher`
* :mod:`.choose` — :func:`make_launcher` picks the level from the configuration
"""

from __future__ import annotations

from execengine.isolation.choose import choose_level, make_launcher
from execengine.isolation.detect import IsolationReport, Layer, detect
from execengine.isolation.launchers import IsolatedLauncher, RestrictedLauncher

__all__ = [
    "IsolatedLauncher",
    "IsolationReport",
    "Layer",
    "RestrictedLauncher",
    "choose_level",
    "detect",
    "make_launcher",
]
