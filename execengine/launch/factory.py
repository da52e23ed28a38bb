"""Choosing a local launcher: by isolation level, or by name from a plugin.

Launchers are named in the ``execengine.launchers`` entry-point group; the built-in ones
are ``none``, ``restricted``, ``isolated`` (this package) and ``ssh``
(:mod:`execengine.remote.launcher`). By default the name is the isolation level chosen from
``code_execution.isolation`` / ``min_isolation`` (a remote host builds its own, see
:mod:`execengine.host`); ``code_execution.launcher`` names one explicitly, e.g. a plugin's::

    [project.entry-points."execengine.launchers"]
    microvm = "my_package.launcher:MicroVmLauncher"

An entry point names a :class:`~execengine.launch.base.Launcher` subclass; the factory
builds it with its ``from_config(config, report)`` class method. A plugin launcher's
``level`` is checked against ``min_isolation`` like the built-in ones.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging

from execengine.config import Config
from execengine.errors import ConfigError, IsolationError
from execengine.isolation.detect import LEVELS, IsolationReport, detect
from execengine.launch.base import Launcher

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "execengine.launchers"

#: the built-in launchers (also declared in the entry-point group; listed here so a source
#: checkout without installed metadata finds them too)
BUILTIN_LAUNCHERS = {
    "none": "execengine.launch.local:LocalLauncher",
    "restricted": "execengine.launch.sandboxed:RestrictedLauncher",
    "isolated": "execengine.launch.sandboxed:IsolatedLauncher",
    "ssh": "execengine.remote.launcher:SshLauncher",
}


def choose_level(requested: str, minimum: str | None, report: IsolationReport) -> str:
    """The level to run at. ``auto`` is the highest available; an explicit level that is
    unavailable degrades to the highest available one below it, with a warning. A result
    below ``minimum`` raises :class:`IsolationError` naming the missing layers."""
    best = report.best
    if requested == "auto":
        level = best
    elif report.levels.get(requested):
        level = requested
    else:
        level = max((lv for lv in LEVELS[: LEVELS.index(requested)] if report.levels.get(lv)),
                    key=LEVELS.index)
        log.warning("isolation level %r is not available (%s); using %r", requested,
                    report.reasons.get(requested, "?"), level)
    _check_minimum(level, minimum, report)
    return level


def _check_minimum(level: str, minimum: str | None, report: IsolationReport) -> None:
    if minimum is None:
        return
    if LEVELS.index(level) < LEVELS.index(minimum):
        raise IsolationError(
            f"code_execution.min_isolation is {minimum!r} but this host supports only "
            f"{level!r}: {report.reasons.get(minimum, 'unavailable')}")


def launcher_names() -> dict[str, str]:
    """Every known launcher name and the ``module:Class`` it loads."""
    names = dict(BUILTIN_LAUNCHERS)
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        names[ep.name] = ep.value
    return names


def launcher_class(name: str) -> type[Launcher]:
    """The launcher class registered under ``name``; :class:`ConfigError` if there is none
    or it is not a :class:`Launcher`."""
    names = launcher_names()
    if name not in names:
        raise ConfigError(f"code_execution.launcher: no launcher named {name!r} (known: "
                          f"{', '.join(sorted(names))}; plugins add names in the "
                          f"{ENTRY_POINT_GROUP!r} entry-point group)")
    module, _, attr = names[name].partition(":")
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"launcher {name!r} ({names[name]}) cannot be loaded: {exc}") from exc
    if not (isinstance(obj, type) and issubclass(obj, Launcher)):
        raise ConfigError(f"launcher {name!r} ({names[name]}) is not a Launcher subclass")
    return obj


def make_launcher(config: Config, report: IsolationReport | None = None) -> Launcher:
    """The launcher for ``config``: the one named by ``code_execution.launcher``, else the
    chosen isolation level's (probing the host once)."""
    ce = config.code_execution
    name = ce.launcher
    if name is None:
        report = report or detect()
        name = choose_level(ce.isolation, ce.min_isolation, report)
    cls = launcher_class(name)
    if ce.min_isolation is not None:
        if cls.level not in LEVELS:
            raise IsolationError(f"code_execution.min_isolation is {ce.min_isolation!r} but "
                                 f"launcher {name!r} runs at level {cls.level!r}")
        report = report or detect()
        _check_minimum(cls.level, ce.min_isolation, report)
    return cls.from_config(config, report)
