"""How a child process is started and killed: the seam between the engine and OS isolation.

* :mod:`.base` — the small interface (:class:`Launcher`, :class:`Child`, :class:`LaunchSpec`)
* :mod:`.local` — level ``none`` (process hygiene only) and the one process-set kill
* :mod:`.sandboxed` — levels ``restricted`` and ``isolated``, built from the layers in
  :mod:`execengine.isolation`
* :mod:`.inprocess` — a fake that runs scripts in threads, for fast logic tests
* :mod:`.factory` — :func:`make_launcher` picks one by level, backend or plugin name
  (the ``execengine.launchers`` entry-point group)
"""

from execengine.launch.base import Child, Launcher, LaunchLimits, LaunchSpec

__all__ = ["Child", "LaunchLimits", "LaunchSpec", "Launcher"]
