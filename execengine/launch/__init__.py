"""How a child process is started and killed: the seam between the engine and OS isolation.

:mod:`execengine.launch.base` defines the small interface; :mod:`execengine.launch.local`
is level ``none`` (process hygiene only); :mod:`execengine.isolation` provides the
``restricted`` and ``isolated`` levels behind the same interface.
"""

from execengine.launch.base import Child, Launcher, LaunchLimits, LaunchSpec

__all__ = ["Child", "LaunchLimits", "LaunchSpec", "Launcher"]
