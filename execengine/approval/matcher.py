"""Matching a command against the pattern table (after normalisation)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from execengine.approval.normalize import Normalized, normalize
from execengine.approval.patterns import ALL_PATTERNS, Pattern


@dataclass(frozen=True)
class Assessment:
    """What the table says about one command."""

    command: str
    normalized: Normalized
    #: hard blocks that matched (no approval unlocks these)
    blocked: tuple[Pattern, ...]
    #: dangerous patterns that matched (an approval can unlock these)
    flagged: tuple[Pattern, ...]

    @property
    def safe(self) -> bool:
        return not self.blocked and not self.flagged

    @property
    def descriptions(self) -> tuple[str, ...]:
        return tuple(p.description for p in (*self.blocked, *self.flagged))


def _views(n: Normalized, scope: str) -> Iterable[str]:
    if scope == "raw":
        return (n.raw,)
    if scope == "text":
        return (n.text,)
    return n.commands


def assess(command: str, patterns: Iterable[Pattern] = ALL_PATTERNS) -> Assessment:
    n = normalize(command)
    hits: list[Pattern] = []
    for p in patterns:
        if any(p.regex.search(view) for view in _views(n, p.scope)):
            hits.append(p)
    return Assessment(
        command=command,
        normalized=n,
        blocked=tuple(p for p in hits if p.hard),
        flagged=tuple(p for p in hits if not p.hard),
    )
