"""OS isolation layers, used by the sandboxed launchers (:mod:`execengine.launch.sandboxed`).

* :mod:`.detect` — cheap start-up probes of every layer, with a reason for each missing one
* :mod:`.landlock`, :mod:`.seccomp`, :mod:`.rlimits`, :mod:`.uids`, :mod:`.acl`,
  :mod:`.cgroups`, :mod:`.mounts`, :mod:`.bridge` — one layer each
* :mod:`.entry` + :mod:`._spawnserver` / :mod:`.spawner` — the single-threaded fork server
  that enters sandboxes, and its host-side client; :mod:`.warm` — entries prepared ahead
* :mod:`.leftovers` — what a killed host left behind, swept at the next start
"""

from __future__ import annotations

from execengine.isolation.detect import IsolationReport, Layer, detect

__all__ = ["IsolationReport", "Layer", "detect"]
