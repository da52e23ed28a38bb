"""Choosing the isolation level from ``code_execution.isolation`` / ``min_isolation``."""

from __future__ import annotations

import logging

from execengine.config import Config
from execengine.errors import IsolationError
from execengine.isolation.detect import LEVELS, IsolationReport, detect
from execengine.isolation.launchers import IsolatedLauncher, RestrictedLauncher
from execengine.launch.base import Launcher
from execengine.launch.local import LocalLauncher

log = logging.getLogger(__name__)


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
    if minimum is not None and LEVELS.index(level) < LEVELS.index(minimum):
        raise IsolationError(
            f"code_execution.min_isolation is {minimum!r} but this host supports only "
            f"{level!r}: {report.reasons.get(minimum, 'unavailable')}")
    return level


def make_launcher(config: Config, report: IsolationReport | None = None) -> Launcher:
    """The launcher for ``config`` at the chosen level (probing the host once)."""
    ce = config.code_execution
    report = report or detect()
    level = choose_level(ce.isolation, ce.min_isolation, report)
    if level == "isolated":

        return IsolatedLauncher(report)
    if level == "restricted":

        return RestrictedLauncher(report)

    return LocalLauncher()
